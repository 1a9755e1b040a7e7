"""How the server recognises a conversation it has seen: one canonical form of chat messages.

A client continuing a conversation resends the history with the server's earlier reply in it. The
reply matches when its content and its tool calls are what the server returned: content compared
with surrounding whitespace ignored (`None` and `""` alike), each call by its id as the server
issued it, its function name, and its arguments as JSON values (so `{"a": 1}` and `{"a":1}` match).
Other messages match on role, content and their tool fields exactly. The canonical form of a
message with no tool fields is `[role, content]`, as the store has always hashed it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase


def canonical_message(message: Mapping[str, Any]) -> list[Any]:
    """The form two messages are compared in (module docstring)."""
    role, content = message["role"], message.get("content") or ""
    if role == "assistant":
        content = content.strip()
    entry: list[Any] = [role, content]
    extra: dict[str, Any] = {}
    if message.get("tool_calls"):
        extra["tool_calls"] = [
            [call.get("id"), call["function"]["name"], _json_value(call["function"]["arguments"])]
            for call in message["tool_calls"]
        ]
    if message.get("tool_call_id") is not None:
        extra["tool_call_id"] = message["tool_call_id"]
    if extra:
        entry.append(extra)
    return entry


def context_hash(messages: Sequence[Mapping[str, Any]]) -> str:
    """A stable key for a conversation: the hash of its messages' canonical forms, in order."""
    canonical = json.dumps(
        [canonical_message(m) for m in messages], separators=(",", ":"), sort_keys=True
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def reply_text(token_ids: Sequence[int], tokenizer: PreTrainedTokenizerBase) -> str:
    """The text of sampled ids: tags kept, a closing EOS left out."""
    ids = list(token_ids)
    if ids and ids[-1] == tokenizer.eos_token_id:
        ids = ids[:-1]
    return tokenizer.decode(ids, skip_special_tokens=False)


def _json_value(arguments: Any) -> Any:
    if not isinstance(arguments, str):
        return arguments
    try:
        return json.loads(arguments)
    except json.JSONDecodeError:
        return arguments
