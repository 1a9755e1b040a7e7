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
"""

from __future__ import annotations

from collections.abc import Sequence

from transformers import PreTrainedTokenizerBase

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


def single_token_ids(tokenizer: PreTrainedTokenizerBase, tags: Sequence[str]) -> list[int] | None:
    """Each tag's id when every tag is an added token of `tokenizer` (always matched whole);
    None when any is not, so the caller must stop on the tag's text instead."""
    added = tokenizer.get_added_vocab()
    if not all(tag in added for tag in tags):
        return None
    return [int(added[tag]) for tag in tags]
