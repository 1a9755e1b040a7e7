"""Judges for `style_stream`: a reply's quality and style, from rules or from an LLM.

The environment's reward is `r_quality * r_style` (both binary): quality as judged, and style
equal to the preferred one. `RuleJudge` (the default) applies the ASCII rules of
`sao.envs.style_stream.styles`. `LLMJudge` asks any OpenAI-compatible chat-completions endpoint,
through the standard library only; a judgement that fails after its retries comes back with
`error` set, is counted in `failures`, and scores 0 -- it never raises.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sao.envs.style_stream.styles import (
    STYLES,
    detect_style,
    quality_problems,
    validate_styles,
)

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judgement:
    """A verdict on one reply.

    Attributes:
        quality: whether the reply is good enough (False when the judge failed).
        style: the reply's style, or None.
        problems: the quality rules broken (rule judge) or the judge's raw verdict (LLM judge).
        error: why the judge failed; None when it worked.
    """

    quality: bool
    style: str | None
    problems: tuple[str, ...] = ()
    error: str | None = None

    def reward(self, preferred_style: str) -> float:
        """`r_quality * r_style`: 1.0 iff the quality is good and the style is the preferred one."""
        return 1.0 if self.error is None and self.quality and self.style == preferred_style else 0.0


class Judge(Protocol):
    """Anything that judges a reply to a prompt about `subject`."""

    def judge(self, prompt: str, reply: str, subject: str) -> Judgement:
        """Judge `reply`; never raises for a bad reply or a failing backend."""
        ...


class RuleJudge:
    """The programmatic judge: quality rules plus marker-based style detection.

    Args:
        styles: the styles a reply may be detected as.
        min_chars / max_chars: length bounds of a good reply.
    """

    def __init__(
        self, styles: Sequence[str] = STYLES, min_chars: int = 12, max_chars: int = 80
    ) -> None:
        if not isinstance(min_chars, int) or not isinstance(max_chars, int):
            raise TypeError("min_chars, max_chars: expected ints")
        if not 1 <= min_chars <= max_chars:
            raise ValueError(
                f"min_chars, max_chars: need 1 <= min <= max, got {min_chars}, {max_chars}"
            )
        self.styles = validate_styles(styles)
        self.min_chars = min_chars
        self.max_chars = max_chars

    def judge(self, prompt: str, reply: str, subject: str) -> Judgement:
        """Apply the rules to `reply`."""
        problems = quality_problems(reply, subject, self.min_chars, self.max_chars)
        return Judgement(not problems, detect_style(reply, self.styles), tuple(problems))


SYSTEM_PROMPT = (
    "You grade a one-line reply to a writing request. Answer with exactly two words. "
    "First word: good if the reply is a fluent single line on the requested subject without "
    "repetition, else bad. Second word: the reply's style, one of {styles}, or none."
)


def parse_verdict(text: str, styles: Sequence[str]) -> tuple[bool, str | None] | None:
    """Read `good|bad STYLE|none` from the judge's answer; None when it is not of that form."""
    words = re.findall(r"[a-z]+", text.lower())
    if len(words) < 2 or words[0] not in ("good", "bad"):
        return None
    if words[1] != "none" and words[1] not in styles:
        return None
    return words[0] == "good", (None if words[1] == "none" else words[1])


class LLMJudge:
    """A judge behind an OpenAI-compatible `/chat/completions` endpoint.

    Args:
        url: the full endpoint URL (e.g. `http://127.0.0.1:8000/v1/chat/completions`).
        model: the model name sent with each request.
        styles: the styles the judge may name.
        timeout_s: limit for one HTTP request.
        retries: extra attempts after a failed one.
        backoff_s: wait before the first retry; doubled before each further one.
        api_key: sent as a bearer token when given.
        sleep: how to wait between attempts (tests pass a no-op).
    """

    def __init__(
        self,
        url: str,
        model: str = "judge",
        styles: Sequence[str] = STYLES,
        timeout_s: float = 10.0,
        retries: int = 2,
        backoff_s: float = 0.5,
        api_key: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ValueError(f"judge_url: must be an http(s) URL, got {url!r}")
        if not isinstance(timeout_s, float | int) or timeout_s <= 0:
            raise ValueError(f"judge_timeout_s: must be > 0, got {timeout_s!r}")
        if not isinstance(retries, int) or retries < 0:
            raise ValueError(f"judge_retries: must be an int >= 0, got {retries!r}")
        if not isinstance(backoff_s, float | int) or backoff_s < 0:
            raise ValueError(f"judge_backoff_s: must be >= 0, got {backoff_s!r}")
        self.url = url
        self.model = model
        self.styles = validate_styles(styles)
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self._api_key = api_key
        self._sleep = sleep
        self._lock = threading.Lock()
        self.calls = 0
        self.failures = 0

    def _request(self, prompt: str, reply: str) -> str:
        body = {
            "model": self.model,
            "temperature": 0,
            "max_tokens": 16,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT.format(styles=", ".join(self.styles))},
                {"role": "user", "content": f"Request: {prompt.strip()}\nReply: {reply}"},
            ],
        }
        headers = {"Content-Type": "application/json"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        request = urllib.request.Request(
            self.url, data=json.dumps(body).encode("utf-8"), headers=headers, method="POST"
        )
        with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            payload: Any = json.loads(response.read().decode("utf-8"))
        return str(payload["choices"][0]["message"]["content"])

    def judge(self, prompt: str, reply: str, subject: str) -> Judgement:
        """Ask the endpoint, retrying with backoff; a final failure scores 0 and is counted."""
        error = "no attempt"
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(self.backoff_s * 2 ** (attempt - 1))
            try:
                answer = self._request(prompt, reply)
            except Exception as err:  # HTTP, timeout, bad JSON: a counted 0, never a crash
                error = f"{type(err).__name__}: {err}"
                continue
            verdict = parse_verdict(answer, self.styles)
            if verdict is None:
                error = f"unreadable verdict: {answer[:40]!r}"
                continue
            with self._lock:
                self.calls += 1
            return Judgement(verdict[0], verdict[1], (answer.strip()[:40],))
        with self._lock:
            self.calls += 1
            self.failures += 1
        logger.warning("style_stream: judge failed after %d attempts: %s", self.retries + 1, error)
        return Judgement(False, None, (), error)


def make_judge(
    styles: Sequence[str] = STYLES,
    min_chars: int = 12,
    max_chars: int = 80,
    judge_url: str | None = None,
    judge_model: str = "judge",
    judge_timeout_s: float = 10.0,
    judge_retries: int = 2,
    judge_backoff_s: float = 0.5,
    judge_api_key_env: str | None = None,
) -> Judge:
    """The rule judge, or an `LLMJudge` when `judge_url` is given.

    The API key is read from the environment variable named `judge_api_key_env`, so it never
    sits in a config file or a run directory.
    """
    if judge_url is None:
        return RuleJudge(styles, min_chars, max_chars)
    api_key = None
    if judge_api_key_env is not None:
        api_key = os.environ.get(judge_api_key_env)
        if not api_key:
            raise ValueError(
                f"judge_api_key_env: environment variable {judge_api_key_env!r} is unset"
            )
    return LLMJudge(
        judge_url,
        judge_model,
        styles,
        timeout_s=judge_timeout_s,
        retries=judge_retries,
        backoff_s=judge_backoff_s,
        api_key=api_key,
    )
