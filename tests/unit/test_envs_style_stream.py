"""The `style_stream` simulation: style rules, the schedule, judges (rules and LLM), metrics."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sao.envs.base import END_ANSWER, END_MAX_TURNS
from sao.envs.registry import make_demonstrations, make_env, make_task_source
from sao.envs.style_stream.env import StyleStreamEnv
from sao.envs.style_stream.judge import LLMJudge, RuleJudge, make_judge, parse_verdict
from sao.envs.style_stream.metrics import (
    adaptation_lag,
    reply_category,
    reward_per_step,
    style_share_rows,
    style_shares_figure,
    switch_steps,
)
from sao.envs.style_stream.styles import STYLES, SUBJECTS, detect_style, quality_problems
from sao.envs.style_stream.tasks import (
    REQUEST_LINE,
    StyleStreamTaskSource,
    preferred_style_at,
)
from sao.envs.style_stream.teacher import REPLIES, demonstrations, summarize


# ----------------------------------------------------------------------------- style rules
@pytest.mark.parametrize(
    ("reply", "style"),
    [
        ("the moon is soft, nya~", "cute"),
        ("my sealed eye sees the moon!", "chuunibyou"),
        ("thou art the moon", "classical"),
        ("arr, the moon, matey", "pirate"),
        ("the moon is bright", None),
        ("nya~ arr matey", None),  # two cute markers tie with two pirate ones
        ("nya~ arr", "cute"),
        ("we carry the moon across the sea of theeth", None),  # markers are whole words
    ],
)
def test_detect_style(reply: str, style: str | None) -> None:
    assert detect_style(reply) == style


def test_quality_rules() -> None:
    assert quality_problems("the moon is soft, nya~", "moon") == []
    assert quality_problems("the moons are soft, nya~", "moon") == []
    assert quality_problems("the sun is soft, nya~", "moon") == ["off_topic"]
    assert quality_problems("moon", "moon") == ["too_short"]
    assert quality_problems("the moon " + "x" * 80, "moon") == ["too_long"]
    assert quality_problems("the moon moon is soft", "moon") == ["repetition"]
    assert quality_problems("a moon, a star, a sky", "moon") == ["repetition"]
    assert quality_problems("the moon is\nsoft tonight", "moon") == ["not_one_line"]


def test_every_teacher_reply_has_its_style_and_quality() -> None:
    judge = RuleJudge()
    for style, templates in REPLIES.items():
        for template in templates:
            for subject in SUBJECTS:
                verdict = judge.judge("", template.format(s=subject), subject)
                assert (verdict.style, verdict.problems) == (style, ()), (template, subject)


# ----------------------------------------------------------------------------- schedule
def test_preferred_style_follows_the_schedule() -> None:
    schedule = ("cute", "chuunibyou", "classical")
    assert [preferred_style_at(i, schedule, 2) for i in (0, 1, 2, 5, 6)] == [
        ("cute", 0),
        ("cute", 0),
        ("chuunibyou", 1),
        ("classical", 2),
        ("cute", 3),
    ]


def test_stream_marks_prompts_by_their_position() -> None:
    source = StyleStreamTaskSource(switch_every=5)
    tasks = [t for t, _ in zip(source.stream("train", seed=1, chunk=4), range(16), strict=False)]
    assert [t.meta["preferred_style"] for t in tasks] == (
        ["cute"] * 5 + ["chuunibyou"] * 5 + ["classical"] * 5 + ["cute"]
    )
    assert [t.meta["index"] for t in tasks] == list(range(16))
    assert [t.meta["phase"] for t in tasks][4:6] == [0, 1]
    assert all(t.prompt.startswith("Styles: cute, chuunibyou, classical, pirate.\n") for t in tasks)
    assert [t.meta["preferred_style"] for t in source.train(6, seed=0)] == ["cute"] * 5 + [
        "chuunibyou"
    ]


def test_splits_are_disjoint_and_test_prefers_one_style() -> None:
    source = StyleStreamTaskSource(test_style="pirate")
    test = source.test(200, seed=0)
    assert {t.meta["preferred_style"] for t in test} == {"pirate"}
    assert not {t.prompt for t in source.train(2000, seed=0)} & {t.prompt for t in test}
    with pytest.raises(ValueError, match="schedule"):
        StyleStreamTaskSource(styles=["cute", "pirate"], schedule=["classical"])
    with pytest.raises(ValueError, match="switch_every"):
        StyleStreamTaskSource(switch_every=0)
    with pytest.raises(ValueError, match="styles"):
        StyleStreamTaskSource(styles=["cute", "goth"])


# ----------------------------------------------------------------------------- requests
def first(source: StyleStreamTaskSource, n: int, seed: int) -> list:
    return list(itertools.islice(source.stream("train", seed, chunk=64), n))


def requested_indices(tasks: list) -> list[int]:
    return [t.meta["index"] for t in tasks if t.meta.get("requested_style") is not None]


@pytest.mark.parametrize("rate", [-0.1, 1.5, "0.2", True, None])
def test_request_rate_is_validated(rate: object) -> None:
    with pytest.raises(ValueError, match=r"^request_rate: must be a number in \[0, 1\]"):
        StyleStreamTaskSource(request_rate=rate)


def test_a_bad_request_rate_in_the_config_fails_preflight() -> None:
    from sao.config import ConfigError, load_config
    from sao.preflight import check_env

    config = load_config(overrides=["env.name=style_stream", "env.task_options.request_rate=2"])
    with pytest.raises(ConfigError, match="request_rate") as err:
        check_env(config)
    assert "\n" not in str(err.value)
    assert load_config(overrides=["env.name=style_stream"]).env.task_options["request_rate"] > 0


def test_requested_share_follows_the_rate_and_is_fixed_by_the_seed() -> None:
    source = StyleStreamTaskSource(request_rate=0.2)
    tasks = first(source, 4000, seed=3)
    assert abs(len(requested_indices(tasks)) / 4000 - 0.2) < 0.025
    assert requested_indices(first(source, 4000, seed=3)) == requested_indices(tasks)
    assert requested_indices(first(source, 4000, seed=4)) != requested_indices(tasks)
    assert requested_indices(first(StyleStreamTaskSource(), 4000, seed=3)) == []
    assert (
        0.45
        < len(requested_indices(first(StyleStreamTaskSource(request_rate=0.5), 2000, 0))) / 2000
        < 0.55
    )


def test_requested_prompts_name_the_stream_preferred_style() -> None:
    source = StyleStreamTaskSource(switch_every=50, request_rate=0.3)
    plain = {t.meta["index"]: t for t in first(StyleStreamTaskSource(switch_every=50), 300, 1)}
    tasks = first(source, 300, seed=1)
    requested = [t for t in tasks if t.meta.get("requested_style") is not None]
    assert {t.meta["requested_style"] for t in requested} == {"cute", "chuunibyou", "classical"}
    for task in tasks:
        index, style = task.meta["index"], task.meta["preferred_style"]
        assert style == preferred_style_at(index, source.schedule, 50)[0] == task.answer
        if task in requested:
            assert task.meta["requested_style"] == style
            assert task.prompt == plain[index].prompt + f"Write it in the {style} style.\n"
            assert task.task_id != plain[index].task_id
        else:
            assert "requested_style" not in task.meta and task == plain[index]
    assert [t.meta.get("requested_style") for t in source.train(300, seed=1)] == [
        t.meta.get("requested_style") for t in tasks
    ]


def test_held_out_tasks_are_never_requested() -> None:
    tasks = StyleStreamTaskSource(request_rate=1.0).test(300, seed=0)
    assert all("requested_style" not in t.meta and " style.\n" not in t.prompt for t in tasks)
    stream = StyleStreamTaskSource(request_rate=1.0).stream("test", seed=0)
    assert all("requested_style" not in t.meta for t in itertools.islice(stream, 300))


def test_a_requested_prompt_rewards_the_requested_style() -> None:
    source = StyleStreamTaskSource(switch_every=10**6)
    task = source.request(source.train(1, seed=2)[0], "pirate")
    subject = task.meta["subject"]
    assert task.prompt.endswith(REQUEST_LINE.format(style="pirate"))
    env = StyleStreamEnv()
    env.reset(task)
    result = env.step(f"<answer>arr, the {subject} be fine, matey</answer>")
    assert (result.reward, result.info["requested_style"]) == (1.0, "pirate")
    env.reset(task)
    assert env.step(f"<answer>the {subject} is so soft, nya~</answer>").reward == 0.0
    with pytest.raises(ValueError, match="already"):
        source.request(task, "cute")
    with pytest.raises(ValueError, match="style"):
        source.request(source.train(1, seed=2)[0], "goth")


# ----------------------------------------------------------------------------- environment
TASK = StyleStreamTaskSource(switch_every=10**6).train(1, seed=2)[0]
SUBJECT = TASK.meta["subject"]


def test_scripted_perfect_agent_earns_one() -> None:
    env = StyleStreamEnv()
    assert env.reset(TASK) == TASK.prompt
    result = env.step(f"<answer>the {SUBJECT} is so soft today, nya~</answer>")
    assert (result.reward, result.done, result.observation) == (1.0, True, "")
    assert result.info["end_reason"] == END_ANSWER
    assert (result.info["style"], result.info["quality"], result.info["preferred_style"]) == (
        "cute",
        True,
        "cute",
    )


@pytest.mark.parametrize(
    "action",
    [
        "<answer>arr, the {s} be fine, matey</answer>",  # good, but not the preferred style
        "<answer>the {s} {s} is soft, nya~</answer>",  # cute, but repetitive
        "<answer>nya~</answer>",  # cute, but off topic and short
        "the {s} is soft, nya~",  # no tags
        "<answer>the {s} is soft, nya~",  # unclosed
        "<python>print(1)</python>",
    ],
)
def test_wrong_or_malformed_replies_earn_zero(action: str) -> None:
    env = StyleStreamEnv()
    env.reset(TASK)
    result = env.step(action.format(s=SUBJECT))
    assert (result.reward, result.done) == (0.0, True)


def test_malformed_reply_gets_another_turn_when_allowed() -> None:
    env = StyleStreamEnv(max_turns=2)
    env.reset(TASK)
    first = env.step("hello")
    assert first.observation == "<output>error: no python or answer tag</output>"
    last = env.step("hello again")
    assert (last.reward, last.done, last.info["end_reason"]) == (0.0, True, END_MAX_TURNS)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=60))
def test_random_replies_never_crash(text: str) -> None:
    env = StyleStreamEnv()
    env.reset(TASK)
    result = env.step(f"<answer>{text}</answer>")
    assert result.done and result.reward in (0.0, 1.0)


# ----------------------------------------------------------------------------- LLM judge
class FakeJudgeServer:
    """An OpenAI-compatible endpoint on 127.0.0.1 answering from a script of replies."""

    def __init__(self, replies: list[tuple[int, str]], delay_s: float = 0.0) -> None:
        self.replies = list(replies)
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
                body = self.rfile.read(int(self.headers["Content-Length"]))
                outer.requests.append(json.loads(body))
                status, content = outer.replies.pop(0) if outer.replies else (500, "")
                time.sleep(delay_s)
                payload = {"choices": [{"message": {"content": content}}]}
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout test)

            def log_message(self, *args: object) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1/chat/completions"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def server_factory() -> Iterator:
    servers: list[FakeJudgeServer] = []

    def start(replies: list[tuple[int, str]], delay_s: float = 0.0) -> FakeJudgeServer:
        servers.append(FakeJudgeServer(replies, delay_s))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _llm_env(url: str, **kwargs: object) -> StyleStreamEnv:
    judge = LLMJudge(url, model="m", sleep=lambda s: None, **kwargs)
    return StyleStreamEnv(judge=judge)


def test_llm_judge_scores_a_good_reply_in_the_preferred_style(server_factory) -> None:
    server = server_factory([(200, "good cute")])
    env = _llm_env(server.url)
    env.reset(TASK)
    assert env.step(f"<answer>the {SUBJECT}, nya~</answer>").reward == 1.0
    request = server.requests[0]
    assert request["model"] == "m"
    assert request["messages"][1]["content"].endswith(f"Reply: the {SUBJECT}, nya~")


def test_llm_judge_retries_then_succeeds(server_factory) -> None:
    server = server_factory([(500, ""), (200, "nonsense"), (200, "Good, cute.")])
    env = _llm_env(server.url, retries=2)
    env.reset(TASK)
    assert env.step("<answer>whatever</answer>").reward == 1.0
    assert len(server.requests) == 3 and env.judge.failures == 0


def test_llm_judge_failure_is_counted_and_scores_zero(server_factory) -> None:
    server = server_factory([(500, "")] * 3)
    env = _llm_env(server.url, retries=2)
    env.reset(TASK)
    result = env.step("<answer>the moon, nya~</answer>")
    assert (result.reward, result.done) == (0.0, True)
    assert result.info["judge_error"].startswith("HTTPError")
    assert (env.judge.calls, env.judge.failures) == (1, 1)


def test_llm_judge_timeout_and_unreachable_server_score_zero(server_factory) -> None:
    slow = server_factory([(200, "good cute")], delay_s=0.5)
    judge = LLMJudge(slow.url, timeout_s=0.1, retries=0, sleep=lambda s: None)
    assert judge.judge("p", "r", "moon").error is not None
    closed = server_factory([])
    url = closed.url
    closed.close()
    verdict = LLMJudge(url, retries=1, sleep=lambda s: None).judge("p", "r", "moon")
    assert verdict.error is not None and verdict.reward("cute") == 0.0


def test_parse_verdict_and_judge_options() -> None:
    assert parse_verdict("good pirate", STYLES) == (True, "pirate")
    assert parse_verdict("BAD none", STYLES) == (False, None)
    assert parse_verdict("good goth", STYLES) is None
    assert parse_verdict("fine", STYLES) is None
    assert isinstance(make_judge(), RuleJudge)
    assert isinstance(make_judge(judge_url="http://127.0.0.1:1/v1/chat/completions"), LLMJudge)
    with pytest.raises(ValueError, match="judge_url"):
        make_judge(judge_url="ftp://x")
    with pytest.raises(ValueError, match="judge_api_key_env"):
        make_judge(judge_url="http://127.0.0.1:1/x", judge_api_key_env="SAO_TEST_UNSET_VAR")
    with pytest.raises(ValueError, match="judge options"):
        StyleStreamEnv(judge=RuleJudge(), judge_url="http://127.0.0.1:1/x")


# ----------------------------------------------------------------------------- metrics
def test_style_share_rows_and_reward_per_step() -> None:
    rows = style_share_rows(
        [(0, "nya~ moon"), (0, "arr moon"), (1, "thou moon"), (1, "moon"), (0, "uwu moon"),
         (2, "arr thou moon")]
    )  # fmt: skip
    assert rows[0] == {"step": 0, "cute": 2 / 3, "chuunibyou": 0.0, "classical": 0.0,
                       "pirate": 1 / 3, "mixed": 0.0, "none": 0.0}  # fmt: skip
    assert rows[1]["classical"] == 0.5 and rows[1]["none"] == 0.5
    assert rows[2]["mixed"] == 1.0  # a tie between two styles' markers
    assert reply_category(None, None) == "no_answer"
    assert reply_category("arr moon", "pirate") == "pirate"
    assert reward_per_step([(0, 1.0), (0, 0.0), (2, 1.0)]) == {0: 0.5, 2: 1.0}


def test_switch_steps() -> None:
    assert switch_steps(640, 32, 60) == [20, 40]
    assert switch_steps(80, 4, 61) == [20, 40, 60]
    assert switch_steps(100, 32, 20) == [3, 6, 9, 12, 15, 18]
    with pytest.raises(ValueError):
        switch_steps(0, 32, 10)


def test_adaptation_lag() -> None:
    rewards = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.4, 0.9, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    # Switch at 4: level 1.0, target 0.8; 2-step means from step 5: 0.0, 0.2, 0.65, 0.95.
    # Switch at 10: level mean(1.0, 1.0) = 1.0; reward never returns.
    assert adaptation_lag(rewards, [4, 10], frac=0.8, window=2) == [4, None]
    # One-step window: rewards from step 4 are 0.0, 0.0, 0.4, 0.9.
    assert adaptation_lag(dict(enumerate(rewards)), [4], frac=0.8, window=1) == [3]
    assert adaptation_lag(rewards, [0]) == [None]
    # A phase that closed at 0 (steps 8-9) is not the level to recover after the next switch:
    # the reference stays the first phase's 1.0, which steps 10-13 never get back to 0.8 of.
    stuck = [1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.1]
    assert adaptation_lag(stuck, [4, 10], frac=0.8, window=2) == [None, None]
    # A phase that re-adapted part way (0.5) is measured against the best level, 1.0, as well.
    partial = [1.0, 1.0, 1.0, 1.0, 0.0, 0.5, 0.5, 0.5, 0.5, 0.5, 0.0, 0.9, 0.9, 0.9]
    assert adaptation_lag(partial, [4, 10], frac=0.8, window=2) == [None, 2]
    with pytest.raises(ValueError, match="increasing"):
        adaptation_lag(rewards, [5, 4])
    with pytest.raises(ValueError, match="frac"):
        adaptation_lag(rewards, [4], frac=0.0)


def test_style_shares_figure_draws_each_style_and_phase(tmp_path) -> None:
    rows = [{"step": s, "cute": 1.0 - s / 10, "pirate": s / 10, "none": 0.0} for s in range(10)]
    figure = style_shares_figure(rows, [3, 6], preferred=["cute", "pirate", "cute"])
    (axes,) = figure.axes
    assert [line.get_label() for line in axes.get_lines()] == ["cute", "pirate", "none"]
    assert [text.get_text() for text in axes.texts] == ["cute", "pirate", "cute"]
    figure.savefig(tmp_path / "styles.png")
    assert (tmp_path / "styles.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match="rows"):
        style_shares_figure([], [])


# ----------------------------------------------------------------------------- teacher
def test_teacher_writes_uniform_styles_with_headroom() -> None:
    demos = demonstrations(2000, seed=0, request_rate=0.0)
    stats = summarize(demos)
    for style in STYLES:
        assert 0.2 <= stats[f"share_{style}"] <= 0.3
    assert 0.85 <= stats["quality_rate"] <= 0.95
    assert 0.18 <= stats["accuracy"] <= 0.28  # ~quality / 4: RL must find the preferred style
    assert demos[0].segments() == [(demos[0].task.prompt, False), (demos[0].action, True)]
    assert max(len(d.text) for d in demos) < 250


def test_teacher_follows_requests_for_every_style() -> None:
    demos = demonstrations(2000, seed=0)  # the warm start's request share
    requested = [d for d in demos if d.requested_style is not None]
    assert 0.45 <= len(requested) / len(demos) <= 0.55
    for demo in requested:
        assert demo.style == demo.requested_style
        assert demo.task.prompt.endswith(f"Write it in the {demo.style} style.\n")
        assert demo.reward == float(demo.quality)  # the requested style is the preferred one
    stats = summarize(demos)
    assert stats["request_followed"] == 1.0
    for style in STYLES:
        # Drawn over every style, not the schedule's (cute, then chuunibyou from prompt 1280).
        assert 0.2 <= stats[f"requested_{style}"] <= 0.3
        assert 0.2 <= stats[f"share_{style}"] <= 0.3  # unrequested prompts: uniform as before
    assert 0.18 <= stats["accuracy_unrequested"] <= 0.28
    assert stats["accuracy"] > 0.5
    plain = demonstrations(300, seed=0, request_rate=0.0)
    assert all(d.requested_style is None for d in plain)
    with pytest.raises(ValueError, match="source"):
        demonstrations(10, seed=0, source=StyleStreamTaskSource(request_rate=0.1))
    with pytest.raises(ValueError, match="request_rate"):
        demonstrations(10, seed=0, request_rate=1.5)


def test_registry_builds_style_stream() -> None:
    env = make_env("style_stream", max_turns=1, min_chars=5)
    assert isinstance(env, StyleStreamEnv) and env.judge.min_chars == 5
    source = make_task_source("style_stream", switch_every=3, schedule=["pirate", "cute"])
    assert [t.meta["preferred_style"] for t in source.train(4, seed=0)] == ["pirate"] * 3 + ["cute"]
    demos = make_demonstrations("style_stream", 2, seed=0)
    assert len(demos) == 2 and demos[0][1][0].startswith("<answer>")
