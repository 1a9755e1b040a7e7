"""Stop strings: does the newest sampled token complete one of them?

A closing tag such as `</python>` is several tokens of a BPE vocabulary and may share a token with
the text after it (`>\\n`). Only the decoded tail is checked: a stop string of `n` UTF-8 bytes lies
within the last `n` tokens that complete it (every token carries at least one byte), and an
earlier occurrence would already have stopped the segment, so any occurrence in the tail is new.
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase


def ends_with_stop_string(
    tokenizer: PreTrainedTokenizerBase, token_ids: Sequence[int], stop_strings: Sequence[str]
) -> bool:
    """Whether the text of `token_ids` has come to contain one of `stop_strings` with its last
    token (the caller checks after every token, so an earlier match would have stopped already)."""
    if not token_ids or not stop_strings:
        return False
    window = max(len(s.encode("utf-8")) for s in stop_strings)
    tail = tokenizer.decode(list(token_ids[-window:]), skip_special_tokens=False)
    return any(s in tail for s in stop_strings)
