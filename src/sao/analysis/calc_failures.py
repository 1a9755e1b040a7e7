"""`sao inspect calc-failures`: why a calc run's episodes failed, by what their tokens show: the
question "what would a critic have to read to see a failure coming?".

    sao inspect calc-failures runs/calc_sao --last 0.33

Reads the run's `trajectories.jsonl` (every completed episode, in the order they completed) and
its tokenizer (`RUN/policy`), and sorts each episode of the last `--last` share by its text:

- `answered without the tool`: the first action is an answer (a guess);
- `no tool result`: the tool was called but no `<output>` precedes the answer (malformed, or out
  of turns);
- `a number the question lacks in the expression`: the last expression uses a number the
  question does not have (or one more often than it does): a miscopied digit, or in a word
  problem a number of the policy's own (`2` for "twice");
- `answer differs from the tool's output`: the answer is not the last output copied;
- `as the tool said, from the question's numbers`: none of the above (a wrong operator, or a word
  problem misread).

The first is visible at the first action token, the second and fourth in the tokens as a missing
tag or digits that differ, the third as digits the question does not have (which fail only
sometimes); only the last needs the question understood.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

from sao.analysis.runs import InspectError, latest, trajectory_rows

KINDS = (
    "answered without the tool",
    "no tool result",
    "a number the question lacks in the expression",
    "answer differs from the tool's output",
    "as the tool said, from the question's numbers",
)
_NUMBER = re.compile(r"\d+(?:\.\d+)?")
_CALL = re.compile(r"<python>(.*?)</python>\s*<output>(.*?)</output>", re.S)
_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, help="a calc run directory")
    parser.add_argument("--last", type=float, default=1.0, help="share of the episodes, latest")


def failure_kind(question: str, actions: str) -> str:
    """The kind (one of `KINDS`) of an episode whose question is `question` and whose text after
    it, actions and observations, is `actions`."""
    first_tag = re.search(r"<(python|answer)>", actions)
    if first_tag is None or first_tag.group(1) == "answer":
        return KINDS[0]
    calls = _CALL.findall(actions)
    answer = _ANSWER.search(actions)
    if not calls or answer is None:
        return KINDS[1]
    expression, output = calls[-1]
    if Counter(_NUMBER.findall(expression)) - Counter(_NUMBER.findall(question)):
        return KINDS[2]
    if answer.group(1).strip() != output.strip():
        return KINDS[3]
    return KINDS[4]


def run(args: argparse.Namespace) -> int:
    if not (args.run / "policy").is_dir():
        raise InspectError(f"{args.run}: no policy/ (not a finished calc run)")
    rows = latest(trajectory_rows(args.run), args.last)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(args.run / "policy", local_files_only=True)
    seen: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    for row in rows:
        ids, mask = row["token_ids"], row["action_mask"]
        start = mask.index(1)
        question = tokenizer.decode(ids[:start], skip_special_tokens=True)
        kind = failure_kind(question, tokenizer.decode(ids[start:], skip_special_tokens=False))
        seen[kind] += 1
        failed[kind] += float(row["reward"]) <= 0.0
    total_failed = sum(failed.values())
    print(f"{len(rows)} episodes, {total_failed} failed")
    print("| kind | episodes | failed | share of the failures |")
    print("|---|---|---|---|")
    for kind in KINDS:
        share = failed[kind] / total_failed if total_failed else 0.0
        print(f"| {kind} | {seen[kind]} | {failed[kind]} | {share:.2f} |")
    return 0
