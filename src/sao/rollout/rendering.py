"""How an episode's text becomes token ids, once, so rollouts and demonstrations share one layout.

An episode is a prompt, then alternating actions (sampled by the policy, or written by a teacher)
and observations (returned by the environment). Token-in/token-out: the prompt and every
observation are tokenized once, on their own, and appended to the ids so far; actions are the ids
the engine sampled. The history is never re-tokenized, so each turn's context extends the previous
turn's ids exactly, and the ids the engine saw are the ids the learner trains on.

Two layouts:

- **chat** (the tokenizer has a chat template): the prompt is a user message rendered with
  `add_generation_prompt=True`; each observation is the template's own text between the end of an
  assistant message and the next generation prompt, with the observation as a user message (for a
  Qwen-style template: `<|im_end|>\\n<|im_start|>user\\n{observation}<|im_end|>\\n<|im_start|>
  assistant\\n`). An action ends at the environment's closing tag, so the assistant turn is closed
  by the observation that follows it.
- **plain** (no chat template): BOS (when the tokenizer has one), the prompt, then actions and
  observations as they are, with no separators. This is the tiny default's layout.

`MessageRenderer` lays out OpenAI-style chat messages (what `sao serve` receives) in the same two
layouts. Chat: the template itself, with `tools=` (`apply_chat_template(messages, tools=tools,
add_generation_prompt=True)`). Plain, message by message: `system`/`user` content ending with a
newline (added when missing), `tool` content inside the output tags (`<output>...</output>`, an
observation as the environments write it), `assistant` content exactly as given, followed by each
of its `tool_calls` in the tool-call format (`sao.formats.tool_calls`; the tiny model's `<tool>{...}</tool>`).
The plain layout does not render `tools`: the tiny model learned its tools from its environments.
A conversation continued after a sampled reply appends only the text between that reply and the
next generation (token-in/token-out), cut out of the template's rendering with a sentinel.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from transformers import PreTrainedTokenizerBase

from sao.formats.tags import OUTPUT_CLOSE, OUTPUT_OPEN
from sao.formats.tool_calls import ToolCallFormat

# Stands in for an assistant message so the template's text after it can be cut out; a string no
# template rewrites and no prompt contains.
_SENTINEL = "\x00sao-assistant-turn\x00"
_PLACEHOLDER_PROMPT = "."


class TurnRenderer:
    """Renders prompts, observations and actions of an episode to ids (see the module docstring).

    Args:
        tokenizer: the policy's tokenizer; its `chat_template`, when set, selects the chat layout.

    Raises:
        ValueError: if the chat template does not render an assistant message verbatim, or renders
            earlier turns differently once a later message is added (the ids could then not extend).
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase) -> None:
        self.tokenizer = tokenizer
        self.uses_chat_template = bool(getattr(tokenizer, "chat_template", None))
        if self.uses_chat_template:
            self._check_template_extends()

    @property
    def layout(self) -> str:
        """`"chat"` or `"plain"`."""
        return "chat" if self.uses_chat_template else "plain"

    def encode(self, text: str) -> list[int]:
        """`text` tokenized on its own, with nothing added."""
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def prompt_ids(self, prompt: str) -> list[int]:
        """Ids of the episode's first context: everything before the first action."""
        if self.uses_chat_template:
            return self.encode(self._render([_user(prompt)], generation_prompt=True))
        bos = self.tokenizer.bos_token_id
        return ([bos] if bos is not None else []) + self.encode(prompt)

    def observation_ids(self, observation: str) -> list[int]:
        """Ids appended after an action for the environment's `observation`."""
        if not self.uses_chat_template:
            return self.encode(observation)
        return self.encode(self._after_assistant(observation))

    def demonstration(self, segments: Sequence[tuple[str, bool]]) -> tuple[list[int], list[int]]:
        """Ids and a 0/1 loss mask (1 exactly on action tokens) of `(text, is_action)` segments.

        The first segment is the prompt; after it, actions and observations alternate as a
        teacher played them. Laid out exactly as a rollout of the same episode is.
        """
        if not segments or segments[0][1]:
            raise ValueError("demonstration: the first segment must be the prompt (not an action)")
        ids = self.prompt_ids(segments[0][0])
        mask = [0] * len(ids)
        for text, is_action in segments[1:]:
            piece = self.encode(text) if is_action else self.observation_ids(text)
            ids += piece
            mask += [int(is_action)] * len(piece)
        return ids, mask

    # ------------------------------------------------------------------ chat template
    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        text = self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )
        if not isinstance(text, str):
            raise ValueError(f"chat template: rendered {type(text).__name__}, expected str")
        return text

    def _after_assistant(self, observation: str) -> str:
        """The template's text from the end of an assistant message to the next generation."""
        messages = [_user(_PLACEHOLDER_PROMPT), _assistant(_SENTINEL), _user(observation)]
        text = self._render(messages, generation_prompt=True)
        return text[text.index(_SENTINEL) + len(_SENTINEL) :]

    def _check_template_extends(self) -> None:
        first = self._render([_user(_PLACEHOLDER_PROMPT)], generation_prompt=True)
        both = self._render(
            [_user(_PLACEHOLDER_PROMPT), _assistant(_SENTINEL), _user(_PLACEHOLDER_PROMPT)],
            generation_prompt=True,
        )
        if both.count(_SENTINEL) != 1:
            raise ValueError("chat template: an assistant message is not rendered verbatim")
        if not both.startswith(first):
            raise ValueError(
                "chat template: the first turn renders differently once an assistant message "
                "follows it, so later turns could not extend the earlier ids"
            )


def _user(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


def _assistant(content: str) -> dict[str, str]:
    return {"role": "assistant", "content": content}


Message = Mapping[str, Any]
"""An OpenAI-style chat message: `role`, `content` (str or None), and optionally `tool_calls`
(`[{"id", "type": "function", "function": {"name", "arguments": JSON text}}]`), `tool_call_id`,
`name`."""


class MessageRenderer:
    """Chat messages -> token ids in the layout training uses (see the module docstring).

    Args:
        tokenizer: the policy's tokenizer; a chat template selects the chat layout.
        tool_format: how the plain layout writes an assistant message's `tool_calls`.

    Raises:
        ValueError: a chat template whose turns do not extend (see `TurnRenderer`).
    """

    def __init__(self, tokenizer: PreTrainedTokenizerBase, tool_format: ToolCallFormat) -> None:
        self.turns = TurnRenderer(tokenizer)
        self.tokenizer = tokenizer
        self.tool_format = tool_format

    @property
    def layout(self) -> str:
        """`"chat"` or `"plain"`."""
        return self.turns.layout

    def encode(self, text: str) -> list[int]:
        """`text` tokenized on its own, with nothing added."""
        return self.turns.encode(text)

    def conversation_ids(
        self, messages: Sequence[Message], tools: Sequence[Mapping[str, Any]] | None = None
    ) -> list[int]:
        """Ids of a whole conversation up to the next reply's first token.

        Chat layout: exactly `apply_chat_template(messages, tools=tools,
        add_generation_prompt=True, tokenize=True)`. Plain: BOS, then each message's text.
        """
        if self.layout == "plain":
            bos = self.tokenizer.bos_token_id
            return ([bos] if bos is not None else []) + self.encode(self.plain_text(messages))
        ids = self.tokenizer.apply_chat_template(
            [template_message(m) for m in messages],
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=True,
        )
        if isinstance(ids, Mapping):  # transformers 5 may answer a BatchEncoding
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def continuation_ids(
        self,
        history: Sequence[Message],
        reply_ids: Sequence[int],
        new_messages: Sequence[Message],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[int]:
        """Ids appended after a sampled reply for the messages that followed it.

        Args:
            history: the messages the reply answered (the template may look back at them).
            reply_ids: the reply's sampled ids; when they end with EOS and the template's text
                after an assistant message starts with it, it is not added a second time.
            new_messages: the messages after the reply.
            tools: the request's tools (the chat template may render them).
        """
        if self.layout == "plain":
            return self.encode(self.plain_text(new_messages))
        messages = [
            *(template_message(m) for m in history),
            {"role": "assistant", "content": _SENTINEL},
            *(template_message(m) for m in new_messages),
        ]
        text = self.tokenizer.apply_chat_template(
            messages,
            tools=list(tools) if tools else None,
            add_generation_prompt=True,
            tokenize=False,
        )
        if not isinstance(text, str) or text.count(_SENTINEL) != 1:
            raise ValueError("chat template: the assistant message is not rendered verbatim")
        after = text[text.index(_SENTINEL) + len(_SENTINEL) :]
        eos = self.tokenizer.eos_token_id
        if reply_ids and eos is not None and reply_ids[-1] == eos:
            eos_text = self.tokenizer.decode([eos], skip_special_tokens=False)
            if eos_text and after.startswith(eos_text):
                after = after[len(eos_text) :]
        return self.encode(after)

    def plain_text(self, messages: Sequence[Message]) -> str:
        """The plain layout's text of `messages` (no BOS)."""
        return "".join(self.plain_message_text(m) for m in messages)

    def plain_message_text(self, message: Message) -> str:
        """One message in the plain layout (module docstring)."""
        role, content = message["role"], message.get("content") or ""
        if role == "assistant":
            calls = "".join(
                self.tool_format.render(call["function"]["name"], _arguments(call))
                for call in message.get("tool_calls") or ()
            )
            return content + calls
        if role == "tool":
            return OUTPUT_OPEN + content + OUTPUT_CLOSE
        return content if content.endswith("\n") else content + "\n"


def template_message(message: Message) -> dict[str, Any]:
    """A message as chat templates expect it: content a string, tool-call arguments an object
    (templates write them with `tojson`), only the fields templates read."""
    out: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("tool_calls"):
        out["tool_calls"] = [
            {
                "id": call.get("id"),
                "type": "function",
                "function": {"name": call["function"]["name"], "arguments": _arguments(call)},
            }
            for call in message["tool_calls"]
        ]
    for key in ("tool_call_id", "name"):
        if message.get(key) is not None:
            out[key] = message[key]
    return out


def _arguments(call: Mapping[str, Any]) -> Any:
    """A call's arguments as an object when its JSON text is one; the text as it is otherwise."""
    raw = call["function"].get("arguments")
    if not isinstance(raw, str):
        return raw if raw is not None else {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return raw
    return value if isinstance(value, dict) else raw


def single_token_ids(tokenizer: PreTrainedTokenizerBase, tags: Sequence[str]) -> list[int] | None:
    """Each tag's id when every tag is an added token of `tokenizer` (always matched whole);
    None when any is not, so the caller must stop on the tag's text instead."""
    added = tokenizer.get_added_vocab()
    if not all(tag in added for tag in tags):
        return None
    return [int(added[tag]) for tag in tags]
