"""A checkpoint with a chat template (BPE, Qwen-style, rendering tools): the server's prompt ids are
the template's own, a continued call extends the earlier call's ids exactly, and the reply's EOS
is not repeated by the text the template puts between turns."""

from __future__ import annotations

import json

import openai
from serve_helpers import CALCULATOR, make_service, running_server, scripted

from sao.formats.tool_calls import tool_call_format
from sao.models.policy import load_policy
from sao.rollout.rendering import MessageRenderer, template_message

HERMES_CALL = (
    '<tool_call>\n{"name": "calculator", "arguments": {"expression": "2+3"}}\n</tool_call>'
)
MESSAGES = [
    {"role": "system", "content": "You add numbers."},
    {"role": "user", "content": "What is 2+3?"},
]


def _template_ids(tokenizer, messages, tools):
    ids = tokenizer.apply_chat_template(
        messages, tools=tools, add_generation_prompt=True, tokenize=True
    )
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


def test_first_call_is_the_template_and_a_tool_result_extends_it(tools_template_dir, tmp_path):
    service = make_service(
        tools_template_dir, tmp_path / "s.db", extra=["train.batch_size=64"], max_prompt_tokens=1500
    )
    tokenizer = service.tokenizer
    engine = scripted(service, [HERMES_CALL, "It is 5."])
    with running_server(service) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        first = client.chat.completions.create(
            model="bpe-tools", messages=MESSAGES, tools=[CALCULATOR]
        )
        (call,) = first.choices[0].message.tool_calls
        history = [
            *MESSAGES,
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "5"},
        ]
        second = client.chat.completions.create(
            model="bpe-tools", messages=history, tools=[CALCULATOR]
        )
        parent = service.store.completion(first.id).trajectory
        child = service.store.completion(second.id).trajectory
    assert service.renderer.layout == "chat" and service.tool_format.name == "hermes"
    first_prompt = _template_ids(tokenizer, MESSAGES, [CALCULATOR])
    assert engine.prompts[0] == first_prompt
    assert first.usage.prompt_tokens == len(first_prompt)
    assert (
        first.usage.completion_tokens
        == len(tokenizer.encode(HERMES_CALL, add_special_tokens=False)) + 1
    )  # the closing EOS, sampled
    assert first.choices[0].finish_reason == "tool_calls"
    assert (call.function.name, json.loads(call.function.arguments)) == (
        "calculator",
        {"expression": "2+3"},
    )

    # Token-in/token-out: the second prompt is the first trajectory, sampled ids included, then
    # the template's text between the turns, masked.
    n = len(parent["token_ids"])
    second_prompt = engine.prompts[1]
    assert second_prompt[:n] == parent["token_ids"] == child["token_ids"][:n]
    assert parent["token_ids"][-1] == tokenizer.eos_token_id
    start = child["turn_spans"][1][0]
    assert second_prompt == child["token_ids"][:start]
    assert child["action_mask"][n:start] == [0] * (start - n)
    assert second.usage.prompt_tokens == start
    # Since the reply is what the template writes for the call, the whole context reads exactly
    # as the template renders the conversation: the reply's EOS is not added twice.
    # (arguments as objects, as templates take them: `template_message`)
    rendered = tokenizer.apply_chat_template(
        [template_message(m) for m in history],
        tools=[CALCULATOR],
        add_generation_prompt=True,
        tokenize=False,
    )
    assert tokenizer.decode(second_prompt, skip_special_tokens=False) == rendered
    assert second.choices[0].message.content == "It is 5."
    assert second.choices[0].finish_reason == "stop"


def test_a_reply_cut_by_the_token_limit_gets_the_turns_closing_token(tools_template_dir):
    _, tokenizer = load_policy(tools_template_dir)
    renderer = MessageRenderer(tokenizer, tool_call_format("hermes"))
    reply = tokenizer.encode("It is", add_special_tokens=False)  # no EOS: cut short
    after = renderer.continuation_ids(
        MESSAGES, reply, [{"role": "user", "content": "And 3+4?"}], [CALCULATOR]
    )
    expected = "<|im_end|>\n<|im_start|>user\nAnd 3+4?<|im_end|>\n<|im_start|>assistant\n"
    assert tokenizer.decode(after, skip_special_tokens=False) == expected
    closed = renderer.continuation_ids(
        MESSAGES, [*reply, tokenizer.eos_token_id], [{"role": "user", "content": "And 3+4?"}]
    )
    assert tokenizer.decode(closed, skip_special_tokens=False) == expected[len("<|im_end|>") :]


def test_tool_choice_none_still_renders_the_tools_for_a_template(tools_template_dir, tmp_path):
    service = make_service(
        tools_template_dir, tmp_path / "s.db", extra=["train.batch_size=64"], max_prompt_tokens=1500
    )
    engine = scripted(service, [HERMES_CALL])
    with running_server(service) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="none", max_retries=0)
        reply = client.chat.completions.create(
            model="bpe-tools", messages=MESSAGES, tools=[CALCULATOR], tool_choice="none"
        )
    assert engine.prompts[0] == _template_ids(service.tokenizer, MESSAGES, [CALCULATOR])
    assert reply.choices[0].message.content == HERMES_CALL
    assert reply.choices[0].finish_reason == "stop"
