"""A character-level tokenizer with the tool tags as single tokens.

Every printable ASCII character (space to `~`) plus `"\\n"` and `"\\t"` is one token, so any ASCII
text round-trips exactly and digit copying is a token-level skill the tiny policy can learn. The
tool tags are added tokens: the tokenizer matches them before it splits into characters, so
`"<python>"` is one token, never eight. Nothing is added automatically on `encode`; callers prepend
`BOS` themselves when they want it.
"""

from __future__ import annotations

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from sao.formats.tags import ALL_TAGS

PAD = "<pad>"
BOS = "<bos>"
EOS = "<eos>"
UNK = "<unk>"

SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK)
TAG_TOKENS: tuple[str, ...] = ALL_TAGS
CHARACTERS: tuple[str, ...] = tuple(chr(c) for c in range(0x20, 0x7F)) + ("\n", "\t")


def _vocabulary() -> dict[str, int]:
    """Special tokens first (so `<pad>` is id 0), then tags, then characters."""
    entries = SPECIAL_TOKENS + TAG_TOKENS + CHARACTERS
    return {token: index for index, token in enumerate(entries)}


def build_tokenizer() -> PreTrainedTokenizerFast:
    """Build the character-level tokenizer (vocabulary of 109 tokens).

    Returns:
        A fast tokenizer with `pad`, `bos`, `eos` and `unk` set. Non-ASCII characters map to
        `<unk>`; ASCII text with tags decodes back to exactly the input.
    """
    backend = Tokenizer(models.WordLevel(vocab=_vocabulary(), unk_token=UNK))
    # `[\s\S]` (unlike `.`) also matches "\n": every character becomes its own pre-token.
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    # Fuse concatenates tokens; the default decoder would join them with spaces.
    backend.decoder = decoders.Fuse()
    backend.add_special_tokens(list(SPECIAL_TOKENS + TAG_TOKENS))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        additional_special_tokens=list(TAG_TOKENS),
        clean_up_tokenization_spaces=False,
    )


def tag_token_ids(tokenizer: PreTrainedTokenizerFast) -> dict[str, int]:
    """Map each tool tag to its single token id.

    Raises:
        ValueError: if the tokenizer does not hold a tag as one token.
    """
    ids: dict[str, int] = {}
    for tag in TAG_TOKENS:
        token_id = tokenizer.convert_tokens_to_ids(tag)
        if token_id is None or token_id == tokenizer.unk_token_id:
            raise ValueError(f"tokenizer: tag {tag!r} is not a single token in this vocabulary")
        ids[tag] = int(token_id)
    return ids
