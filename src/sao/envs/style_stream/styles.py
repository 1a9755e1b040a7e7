"""Pure rules of `style_stream`: the writing styles, their ASCII markers, and reply quality.

A reply's style is the style whose markers it uses most (`detect_style`); a reply that uses no
marker, or ties between styles, has no style, so spraying every marker never pays. A reply has
quality when it passes every rule of `quality_problems`: one line, printable ASCII, a length within
bounds, mentions the prompt's subject, and no repeated words.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

STYLE_MARKERS: dict[str, tuple[str, ...]] = {
    "cute": ("~", "nya", "uwu"),
    "chuunibyou": ("dark flame", "sealed eye", "abyss"),
    "classical": ("thee", "thou", "hath", "doth"),
    "pirate": ("arr", "matey", "ahoy"),
}
STYLES: tuple[str, ...] = tuple(STYLE_MARKERS)

SUBJECTS: tuple[str, ...] = (
    "moon", "sun", "rain", "river", "cat", "dog", "tea", "coffee", "bread", "garden",
    "city", "train", "book", "song", "star", "wind", "snow", "ocean", "forest", "mountain",
    "bird", "flower", "bridge", "lamp", "road", "cloud", "storm", "apple", "candle", "clock",
    "desk", "door", "window", "kitten", "horse", "ship", "island", "lake", "meadow", "night",
    "morning", "summer", "autumn", "winter", "market", "library", "school", "kitchen", "piano",
    "violin", "letter", "map", "castle", "tower", "village", "harbor", "field", "stone", "tree",
    "leaf", "fire", "bell", "coat", "hat", "shoe", "cake", "soup", "honey", "owl",
    "fox", "wolf", "bear", "rabbit", "frog", "fish", "whale", "robot", "rocket", "planet",
)  # fmt: skip
OCCASIONS: tuple[str, ...] = (
    "for a friend", "at dawn", "on a rainy day", "for a child", "at night", "in spring",
    "for a letter", "after work", "on a trip", "for a card", "in winter", "at sea",
)  # fmt: skip
PHRASINGS: tuple[str, ...] = (
    "Write one line about the {subject} {occasion}.",
    "Say something short about the {subject} {occasion}.",
    "One line on the {subject} {occasion}, please.",
    "Describe the {subject} in one line, {occasion}.",
)

_WORD = re.compile(r"[a-z']+")


def _marker_pattern(marker: str) -> re.Pattern[str]:
    if marker.isalpha() or " " in marker:
        return re.compile(r"\b" + re.escape(marker) + r"\b", re.IGNORECASE)
    return re.compile(re.escape(marker))


_PATTERNS: dict[str, tuple[re.Pattern[str], ...]] = {
    style: tuple(_marker_pattern(m) for m in markers) for style, markers in STYLE_MARKERS.items()
}


def marker_counts(reply: str, styles: Sequence[str] = STYLES) -> dict[str, int]:
    """How many marker occurrences of each style `reply` contains."""
    unknown = [s for s in styles if s not in _PATTERNS]
    if unknown:
        raise ValueError(f"styles: unknown {unknown}; known: {list(STYLES)}")
    return {s: sum(len(p.findall(reply)) for p in _PATTERNS[s]) for s in styles}


def detect_style(reply: str, styles: Sequence[str] = STYLES) -> str | None:
    """The style whose markers `reply` uses most; None for no marker or a tie."""
    counts = marker_counts(reply, styles)
    best = max(counts.values(), default=0)
    leaders = [s for s, c in counts.items() if c == best]
    return leaders[0] if best > 0 and len(leaders) == 1 else None


def mentions(reply: str, subject: str) -> bool:
    """Whether `reply` names `subject` as a word (a plural `s`/`es` counts)."""
    return re.search(rf"\b{re.escape(subject)}(s|es)?\b", reply, re.IGNORECASE) is not None


def quality_problems(
    reply: str, subject: str, min_chars: int = 12, max_chars: int = 80
) -> list[str]:
    """Every quality rule `reply` breaks, as short names; empty means good quality."""
    problems = []
    text = reply.strip()
    if "\n" in text:
        problems.append("not_one_line")
    if not all(" " <= ch <= "~" or ch == "\n" for ch in text):
        problems.append("not_ascii")
    if len(text) < min_chars:
        problems.append("too_short")
    if len(text) > max_chars:
        problems.append("too_long")
    if not mentions(text, subject):
        problems.append("off_topic")
    words = _WORD.findall(text.lower())
    if any(a == b for a, b in zip(words, words[1:], strict=False)) or any(
        n > 2 for n in Counter(words).values()
    ):
        problems.append("repetition")
    return problems


def validate_styles(styles: Sequence[str], name: str = "styles") -> tuple[str, ...]:
    """`styles` as a tuple, or ValueError naming the unknown or repeated ones."""
    chosen = tuple(styles)
    unknown = [s for s in chosen if s not in STYLE_MARKERS]
    if not chosen or unknown or len(set(chosen)) != len(chosen):
        raise ValueError(f"{name}: must be distinct styles from {list(STYLES)}, got {list(chosen)}")
    return chosen
