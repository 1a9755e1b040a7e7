"""OpenAI chat messages <-> the text layout the policy was trained on.

The environments give the policy plain text: `BOS`, the prompt, then its actions and the
environment's observations concatenated (see `sao.rollout.agent_loop`). A chat maps onto that
layout message by message, here and nowhere else:

    system, user   the content, ending with a newline (added when missing), as a prompt does
    tool           the content inside the output tags, as a tool observation does
    assistant      the content exactly as the server returned it (tags included)

so the opening user message of a `style_stream` conversation is the environment's prompt text,
and the reply is what the policy wrote: `<answer>...</answer>`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from sao.tags import OUTPUT_CLOSE, OUTPUT_OPEN

ROLES = ("system", "user", "assistant", "tool")


def message_text(role: str, content: str) -> str:
    """The text one message contributes to the policy's context."""
    if role == "assistant":
        return content
    if role == "tool":
        return OUTPUT_OPEN + content + OUTPUT_CLOSE
    return content if content.endswith("\n") else content + "\n"


def render_ids(
    messages: Sequence[dict[str, Any]], tokenizer: PreTrainedTokenizerBase, with_bos: bool = True
) -> list[int]:
    """Token ids of `messages` in the training layout (BOS first when the tokenizer has one)."""
    text = "".join(message_text(m["role"], m["content"]) for m in messages)
    ids = tokenizer.encode(text, add_special_tokens=False)
    if with_bos and tokenizer.bos_token_id is not None:
        ids = [tokenizer.bos_token_id, *ids]
    return ids


def context_hash(messages: Sequence[dict[str, Any]]) -> str:
    """A stable key for a conversation (role and content of each message, in order)."""
    canonical = json.dumps([[m["role"], m["content"]] for m in messages], separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def reply_text(token_ids: Sequence[int], tokenizer: PreTrainedTokenizerBase) -> str:
    """The assistant content for sampled ids: the text with tags, without a closing EOS."""
    ids = list(token_ids)
    if ids and ids[-1] == tokenizer.eos_token_id:
        ids = ids[:-1]
    return tokenizer.decode(ids, skip_special_tokens=False)
