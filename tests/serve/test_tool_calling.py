"""OpenAI tool calling on the tiny model's plain layout (its `<tool>{...}</tool>` format), through
the official `openai` client. The engine is scripted so each test knows the reply it parses."""

from __future__ import annotations

import json

import openai
import pytest
from serve_helpers import CALCULATOR, STYLE_PROMPT, make_service, running_server, scripted, user

from sao.formats.tool_calls import tool_call_format
from sao.serve.tools import ContentStream, ToolPlan, plan_tools

CALL = '<tool>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool>'


def _serve(policy_dir, tmp_path, replies, eos=False):
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    engine = scripted(service, replies, eos)
    return service, engine


def _client(url):
    return openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)


def _action_ids(trajectory):
    return [t for t, m in zip(trajectory["token_ids"], trajectory["action_mask"], strict=True) if m]


def test_a_call_comes_back_as_tool_calls_and_the_sampled_ids_train(policy_dir, tmp_path):
    service, engine = _serve(policy_dir, tmp_path, [CALL])
    with running_server(service) as url:
        reply = _client(url).chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR]
        )
        status = _client(url).get("/status", cast_to=object)
        stored = service.store.completion(reply.id)
    choice = reply.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    (call,) = choice.message.tool_calls
    assert call.id.startswith("call_") and len(call.id) == len("call_") + 24
    assert call.type == "function"
    assert call.function.name == "calculator"
    assert json.loads(call.function.arguments) == {"expression": "2+3"}
    assert _action_ids(stored.trajectory) == service.tokenizer.encode(
        CALL, add_special_tokens=False
    )
    # The plain layout does not render tools: the prompt is BOS + the user text, as without them.
    tokenizer = service.tokenizer
    prompt = [tokenizer.bos_token_id, *tokenizer.encode(STYLE_PROMPT, add_special_tokens=False)]
    assert engine.prompts[0] == prompt
    assert (status["tool_calls"], status["malformed_tool_calls"]) == (1, 0)


def test_a_streamed_call_arrives_as_tool_call_deltas(policy_dir, tmp_path):
    service, _ = _serve(policy_dir, tmp_path, ["Let me add." + CALL, "Let me add." + CALL])
    with running_server(service) as url:
        client = _client(url)
        chunks = list(
            client.chat.completions.create(
                model="tiny-policy", messages=user(), tools=[CALCULATOR], stream=True
            )
        )
        with client.chat.completions.stream(
            model="tiny-policy", messages=user(), tools=[CALCULATOR]
        ) as stream:
            final = stream.get_final_completion()
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    assert deltas[0].role == "assistant"
    assert "".join(d.content or "" for d in deltas) == "Let me add."
    heads = [t for d in deltas for t in d.tool_calls or () if t.id]
    assert [(t.index, t.type, t.function.name) for t in heads] == [(0, "function", "calculator")]
    arguments = "".join(
        t.function.arguments or "" for d in deltas for t in d.tool_calls or () if t.function
    )
    assert json.loads(arguments) == {"expression": "2+3"}
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "tool_calls" and set(finishes[:-1]) == {None}
    # The client library's own accumulation of the stream gives the same message.
    message = final.choices[0].message
    assert final.choices[0].finish_reason == "tool_calls"
    assert message.content == "Let me add."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("calculator", {"expression": "2+3"})
    ]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ('<tool>{"name": "calculator", "arguments": </tool>', "not valid JSON"),
        ('<tool>{"name": "rm", "arguments": {"path": "/"}}</tool>', "undeclared"),
    ],
)
def test_a_malformed_call_is_content_with_stop_and_counted(policy_dir, tmp_path, reply, reason):
    service, _ = _serve(policy_dir, tmp_path, [reply, reply])
    with running_server(service) as url:
        client = _client(url)
        whole = client.chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR]
        )
        chunks = list(
            client.chat.completions.create(
                model="tiny-policy", messages=user(), tools=[CALCULATOR], stream=True
            )
        )
        status = client.get("/status", cast_to=object)
    assert whole.choices[0].finish_reason == "stop"
    assert whole.choices[0].message.content == reply
    assert whole.choices[0].message.tool_calls is None
    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert streamed == reply
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert (status["malformed_tool_calls"], status["tool_calls"]) == (2, 0)


def test_tool_choice_none_returns_the_call_text_as_content(policy_dir, tmp_path):
    service, engine = _serve(policy_dir, tmp_path, [CALL])
    with running_server(service) as url:
        reply = _client(url).chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR], tool_choice="none"
        )
    assert reply.choices[0].finish_reason == "stop"
    assert reply.choices[0].message.content == CALL
    assert reply.choices[0].message.tool_calls is None


def test_required_and_named_tool_choice_force_the_opening_as_untrained_context(
    policy_dir, tmp_path
):
    replies = [
        '{"name": "calculator", "arguments": {"expression": "1"}}</tool>',
        '{"expression": "7*6"}}</tool>',
        "no call here",
    ]
    service, engine = _serve(policy_dir, tmp_path, replies)
    tokenizer = service.tokenizer
    named = {"type": "function", "function": {"name": "calculator"}}
    with running_server(service) as url:
        client = _client(url)
        required = client.chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR], tool_choice="required"
        )
        forced = client.chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR], tool_choice=named
        )
        failed = client.chat.completions.create(
            model="tiny-policy", messages=user(), tools=[CALCULATOR], tool_choice="required"
        )
        with pytest.raises(openai.BadRequestError, match="not among the declared tools"):
            client.chat.completions.create(
                model="tiny-policy",
                messages=user(),
                tools=[CALCULATOR],
                tool_choice={"type": "function", "function": {"name": "shell"}},
            )
        trajectory = service.store.completion(forced.id).trajectory
        with pytest.raises(openai.BadRequestError, match="declares no tools"):
            client.chat.completions.create(
                model="tiny-policy", messages=user(), tool_choice="required"
            )
    prompt = [tokenizer.bos_token_id, *tokenizer.encode(STYLE_PROMPT, add_special_tokens=False)]
    opening = tokenizer.encode(
        '<tool>{"name": "calculator", "arguments": ', add_special_tokens=False
    )
    assert engine.prompts[0] == [*prompt, tokenizer.convert_tokens_to_ids("<tool>")]
    assert engine.prompts[1] == [*prompt, *opening]
    assert required.choices[0].message.tool_calls[0].function.arguments == '{"expression": "1"}'
    call = forced.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "calculator",
        {"expression": "7*6"},
    )
    start, end = trajectory["turn_spans"][0]
    assert start == len(prompt) + len(opening)
    assert trajectory["action_mask"][len(prompt) : start] == [0] * len(opening)
    assert trajectory["token_ids"][start:end] == tokenizer.encode(
        replies[1], add_special_tokens=False
    )
    assert failed.choices[0].finish_reason == "stop"
    assert failed.choices[0].message.content == "<tool>no call here"


def test_a_tool_result_continues_the_trajectory_as_a_masked_observation(policy_dir, tmp_path):
    service, engine = _serve(policy_dir, tmp_path, [CALL, "<answer>5</answer>"])
    tokenizer = service.tokenizer
    with running_server(service) as url:
        client = _client(url)
        messages = user()
        first = client.chat.completions.create(
            model="tiny-policy", messages=messages, tools=[CALCULATOR]
        )
        call = first.choices[0].message.tool_calls[0]
        # The `openai` tool loop: append the assistant message object, then the tool's result.
        messages += [
            first.choices[0].message,
            {"role": "tool", "tool_call_id": call.id, "content": "5"},
        ]
        second = client.chat.completions.create(
            model="tiny-policy", messages=messages, tools=[CALCULATOR]
        )
        status = client.get("/status", cast_to=object)
        parent = service.store.completion(first.id).trajectory
        child = service.store.completion(second.id).trajectory
    assert second.model_extra["parent_id"] == first.id
    n = len(parent["token_ids"])
    assert child["token_ids"][:n] == parent["token_ids"]
    observation = tokenizer.encode("<output>5</output>", add_special_tokens=False)
    start, end = child["turn_spans"][1]
    assert child["token_ids"][n:start] == observation
    assert child["action_mask"][n:start] == [0] * len(observation)
    assert engine.prompts[1] == child["token_ids"][:start]
    assert second.usage.prompt_tokens == start
    assert status["continued"] == 1


def test_content_stream_holds_back_a_possible_open_tag():
    fmt = tool_call_format("hermes")
    plan = ToolPlan(fmt, [CALCULATOR], "auto")
    stream = ContentStream(plan)
    assert stream.delta("Sure") == "Sure"
    assert stream.delta("Sure <tool_") == " "
    assert stream.delta("Sure <tool_call>\n{") == ""
    assert stream.sent == "Sure "
    assert ContentStream(ToolPlan(fmt, [CALCULATOR], "required")).delta("abc") == ""
    assert ContentStream(ToolPlan(fmt)).delta("a <tool_call>") == "a <tool_call>"


def test_tool_plans_follow_openai_defaults():
    from sao.serve.protocol import ChatCompletionRequest

    fmt = tool_call_format("sao")

    def plan(**fields):
        return plan_tools(ChatCompletionRequest(model="m", messages=user(), **fields), fmt)

    assert plan().mode == "off"
    assert plan(tools=[CALCULATOR]).mode == "auto"
    assert plan(tools=[CALCULATOR], tool_choice="none").mode == "off"
    assert plan(tools=[CALCULATOR], tool_choice="required").forced_text == "<tool>"


def test_a_sampled_stream_with_tools_delivers_exactly_the_stored_reply(policy_dir, tmp_path):
    """The real engine, token by token: whatever it samples, the streamed content (and calls)
    joined are the message the server stored as its reply."""
    service = make_service(policy_dir, tmp_path / "s.db", extra=["train.batch_size=64"])
    with running_server(service) as url:
        client = _client(url)
        for _ in range(3):
            chunks = list(
                client.chat.completions.create(
                    model="tiny-policy", messages=user(), tools=[CALCULATOR], stream=True
                )
            )
            deltas = [c.choices[0].delta for c in chunks if c.choices]
            content = "".join(d.content or "" for d in deltas)
            names = [t.function.name for d in deltas for t in d.tool_calls or () if t.id]
            stored = service.store.completion(chunks[0].id)
            assert stored.message["content"] == (content or (None if names else ""))
            assert names == [c["function"]["name"] for c in stored.message.get("tool_calls", [])]
            assert stored.finish_reason == [c.choices[0].finish_reason for c in chunks][-1]
