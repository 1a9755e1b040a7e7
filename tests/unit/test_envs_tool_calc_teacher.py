"""The `tool_calc` teacher, its layout as `sao serve` renders it, and its registration."""

from __future__ import annotations

import json
import random
import re

import pytest

from sao.config import env_defaults, load_config
from sao.envs import registry
from sao.envs.tool_calc import REGISTRATION, ToolCalcEnv, ToolCalcTaskSource
from sao.envs.tool_calc.calculator import evaluate
from sao.envs.tool_calc.teacher import ToolCalcTeacher, demonstrations
from sao.formats.tool_calls import tool_call_format
from sao.models.tokenizer import build_tokenizer
from sao.presets import leaf_items
from sao.rollout.rendering import MessageRenderer, TurnRenderer

TOOL_DEMO = re.compile(
    r'Q: [^\n]+\n<tool>\{"name": "calculator", "arguments": \{"expression": "([^"]+)"\}\}</tool>'
    r"<output>(-?\d+)</output><answer>\2</answer>"
)
MENTAL_DEMO = re.compile(r"Q: [^\n]+\n<answer>-?\d+</answer>")


def test_demonstrations_follow_one_of_two_exact_shapes() -> None:
    for demo in demonstrations(300, seed=0):
        match = (TOOL_DEMO if demo.used_tool else MENTAL_DEMO).fullmatch(demo.text)
        assert match, demo.text
        if demo.used_tool:
            assert evaluate(match.group(1)) == match.group(2)
            assert (match.group(1) != demo.task.meta["expression"]) == demo.slipped
        assert demo.turns[-1].observation == ""


def test_default_teacher_mostly_calls_the_tool_and_is_imperfect() -> None:
    demos = demonstrations(1000, seed=1)
    tool_rate = sum(d.used_tool for d in demos) / len(demos)
    accuracy = sum(d.reward for d in demos) / len(demos)
    assert 0.75 <= tool_rate <= 0.85
    assert 0.65 <= accuracy <= 0.85
    for demo in demos:
        right = demo.text.endswith(f"<answer>{demo.task.answer}</answer>")
        assert demo.reward == (1.0 if right else 0.0)


def test_knobs_control_the_mistakes() -> None:
    careful = ToolCalcTeacher(p_no_tool=0.0, p_slip=0.0)
    assert all(d.reward == 1.0 and d.used_tool for d in demonstrations(150, 2, teacher=careful))
    slipping = ToolCalcTeacher(p_no_tool=0.0, p_slip=1.0)
    assert all(d.slipped and d.reward == 0.0 for d in demonstrations(100, 3, teacher=slipping))
    never_right = ToolCalcTeacher(p_no_tool=1.0, mental_accuracy={d: 0.0 for d in (1, 2, 3, 4)})
    demos = demonstrations(100, 3, teacher=never_right)
    assert all(not d.used_tool and d.reward == 0.0 for d in demos)
    with pytest.raises(ValueError, match="p_slip: must be a probability"):
        ToolCalcTeacher(p_slip=1.5)
    with pytest.raises(ValueError, match=r"mental_accuracy: missing difficulties \[4\]"):
        ToolCalcTeacher(mental_accuracy={1: 0.5, 2: 0.5, 3: 0.5})


def test_demonstrations_are_deterministic_in_the_seed() -> None:
    assert [d.text for d in demonstrations(50, 7)] == [d.text for d in demonstrations(50, 7)]
    assert [d.text for d in demonstrations(50, 7)] != [d.text for d in demonstrations(50, 8)]


def test_a_demonstration_renders_to_exact_tiny_tokenizer_ids() -> None:
    tokenizer = build_tokenizer()
    task = ToolCalcTaskSource().train(1, seed=0)[0]
    task = type(task)(task.task_id, "Q: 12*3=?\n", "36", {"expression": "12*3", "difficulty": 1})
    demo = ToolCalcTeacher(p_no_tool=0.0, p_slip=0.0).demonstrate(task, random.Random(0))
    ids, mask = TurnRenderer(tokenizer).demonstration(demo.segments())
    call = '{"name": "calculator", "arguments": {"expression": "12*3"}}'
    tokens = ["<bos>", *"Q: 12*3=?\n", "<tool>", *call, "</tool>", "<output>", *"36"]
    tokens += ["</output>", "<answer>", *"36", "</answer>"]
    assert ids == tokenizer.convert_tokens_to_ids(tokens)
    assert tokenizer.unk_token_id not in ids
    in_action = [0] * 11 + [1] * (len(call) + 2) + [0] * 4 + [1] * 4
    assert mask == in_action


def test_demonstrations_render_as_sao_serve_renders_the_agents_messages() -> None:
    """The ids SFT trains on are the ids the server builds from an OpenAI agent's messages:
    the question, each call as `tool_calls` with null content, each result as a `tool` message."""
    tokenizer = build_tokenizer()
    renderer = TurnRenderer(tokenizer)
    serving = MessageRenderer(tokenizer, tool_call_format("sao"))
    for demo in demonstrations(100, seed=4):
        # The agent sends the question without its newline; the server adds it.
        messages = [{"role": "user", "content": demo.task.prompt.removesuffix("\n")}]
        for number, turn in enumerate(demo.turns):
            if not turn.observation:
                messages.append({"role": "assistant", "content": turn.action})
                continue
            arguments = json.loads(turn.action[6:-7])["arguments"]
            call = {"name": "calculator", "arguments": json.dumps(arguments, separators=(",", ":"))}
            call_id = f"call_{number}"
            messages.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": call_id, "type": "function", "function": call}],
                }
            )
            result = evaluate(arguments["expression"])
            messages.append({"role": "tool", "tool_call_id": call_id, "content": result})
        assert renderer.demonstration(demo.segments())[0] == serving.conversation_ids(messages)


def test_registry_lists_and_builds_it() -> None:
    assert "tool_calc" in registry.known_env_names()
    assert registry.registration_for("tool_calc") is REGISTRATION
    env = registry.make_env("tool_calc", max_turns=3, max_output_chars=40)
    assert isinstance(env, ToolCalcEnv) and (env.max_turns, env.max_output_chars) == (3, 40)
    source = registry.make_task_source("tool_calc", difficulties=(4,))
    assert {t.meta["kind"] for t in source.train(10, seed=0)} == {"word"}
    segments = registry.make_demonstrations("tool_calc", 2, 0)
    assert [s[0][1] for s in segments] == [False, False] and all(s[1][1] for s in segments)


def test_packaged_config_validates_and_fits_the_teacher() -> None:
    packaged = env_defaults("tool_calc")
    assert set(packaged) <= {"env", "rollout", "sft", "train"} and packaged
    config = load_config("sao", overrides=["env.name=tool_calc"])
    for dotted, value in leaf_items(packaged).items():
        node = config
        for key in dotted.split("."):
            node = getattr(node, key)
        assert node == value, dotted
    tokenizer, renderer = build_tokenizer(), TurnRenderer(build_tokenizer())
    demos = demonstrations(500, 5)
    assert max(len(tokenizer.encode(d.turns[0].action)) for d in demos) <= (
        config.rollout.max_new_tokens
    )
    assert max(len(renderer.demonstration(d.segments())[0]) for d in demos) <= (
        config.env.max_tokens
    )
