"""Warm start and evaluation on the tiny model: loss masking, learning, saving, `sao eval` JSON."""

import json

import torch

from sao.cli import main
from sao.config import SFTConfig, load_config, save_config
from sao.envs.registry import make_demonstrations
from sao.models.policy import build_tiny_policy, load_policy
from sao.models.tokenizer import build_tokenizer
from sao.runtime.checkpoints import checkpoint_dir, checkpoint_policy_state
from sao.runtime.train import train
from sao.warmstart.sft import (
    collate_demonstrations,
    encode_segments,
    sft_loss,
    train_sft,
    warm_start,
)
from small_run import small_config


def test_loss_mask_covers_exactly_the_action_tokens():
    tokenizer = build_tokenizer()
    segments = [("Q: 1+1=?\n", False), ("<answer>2</answer>", True), ("<output>x</output>", False)]
    ids, mask = encode_segments(tokenizer, segments)
    assert ids[0] == tokenizer.bos_token_id
    assert (
        tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if m]) == "<answer>2</answer>"
    )
    # BOS, nine characters, then tag-2-tag and tag-x-tag: tags are single tokens.
    assert len(ids) == 1 + 9 + 3 + 3
    assert mask == [0] * 10 + [1] * 3 + [0] * 3


def test_sft_lowers_the_loss_on_demonstrations():
    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=0)
    examples = make_demonstrations("calc", 64, seed=0)
    config = SFTConfig(steps=40, batch_size=16, warmup_steps=5, num_demonstrations=64)
    curve = train_sft(model, tokenizer, examples, config, progress=False)
    assert len(curve) == 40
    assert sum(curve[-5:]) / 5 < 0.7 * sum(curve[:5]) / 5


def test_sft_loss_over_packed_sequences_equals_one_padded_pass():
    tokenizer = build_tokenizer()
    model = build_tiny_policy(tokenizer, seed=0)
    encoded = [encode_segments(tokenizer, ex) for ex in make_demonstrations("code_repair", 6, 1)]
    input_ids, loss_mask = collate_demonstrations(encoded, tokenizer.pad_token_id)
    lengths = sorted(len(ids) for ids, _ in encoded)
    assert lengths[0] < lengths[-1]  # rows of different lengths: packing really saves padding

    def loss_and_grads(max_tokens):
        model.zero_grad()
        loss = sft_loss(model, input_ids, loss_mask, tokenizer.pad_token_id, max_tokens)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters() if p.grad is not None]

    full_loss, full_grads = loss_and_grads(None)
    loss, grads = loss_and_grads(2 * lengths[-1])  # several passes
    torch.testing.assert_close(loss, full_loss, atol=1e-5, rtol=1e-5)
    assert len(grads) == len(full_grads)
    for grad, full in zip(grads, full_grads, strict=True):
        torch.testing.assert_close(grad, full, atol=1e-5, rtol=1e-4)


def test_warm_start_saves_a_policy_that_sao_eval_scores(tmp_path):
    out = tmp_path / "policy"
    config = SFTConfig(steps=2, batch_size=4, warmup_steps=1, num_demonstrations=8)
    warm_start("calc", out, config, progress=False)
    assert (out / "config.json").exists() and (out / "sft_curve.txt").exists()
    report = tmp_path / "eval.json"
    assert main(["eval", "--model", str(out), "--n", "4", "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    assert result["n"] == 4
    assert {"accuracy", "mean_turns", "tool_call_rate", "format_error_rate"} <= set(result)
    assert 0.0 <= result["accuracy"] <= 1.0 and result["mean_turns"] >= 1.0
    assert len(result["task_scores"]) == 4


def test_sao_eval_compares_two_policies_on_the_same_tasks(tmp_path, capsys):
    out = tmp_path / "policy"
    config = SFTConfig(steps=2, batch_size=4, warmup_steps=1, num_demonstrations=8)
    warm_start("calc", out, config, progress=False)
    report = tmp_path / "eval.json"
    argv = ["eval", "--model", str(out), "--baseline", str(out), "--n", "3", "--samples", "2"]
    assert main([*argv, "--json", str(report)]) == 0
    assert "paired difference (model - baseline, same 3 tasks)" in capsys.readouterr().out
    result = json.loads(report.read_text())
    assert result["n"] == 3 and result["samples"] == 2
    assert result["baseline"]["n"] == 3 and len(result["baseline"]["task_scores"]) == 3
    assert all(score in (0.0, 0.5, 1.0) for score in result["task_scores"])
    paired = result["paired_difference"]
    expected = result["accuracy"] - result["baseline"]["accuracy"]
    assert paired["n"] == 3 and abs(paired["difference"] - expected) < 1e-9


def test_sao_eval_run_scores_a_finished_run_under_its_own_config(tmp_path, capsys):
    run = tmp_path / "run"
    config = SFTConfig(steps=2, batch_size=4, warmup_steps=1, num_demonstrations=8)
    warm_start("calc", run / "policy", config, progress=False)
    overrides = ["train.eval_n=3", "rollout.top_p=0.5", "rollout.max_new_tokens=24"]
    save_config(load_config("grpo_dis", overrides=overrides), run / "config.yaml")
    report = tmp_path / "eval.json"
    assert main(["eval", "--run", str(run), "--json", str(report)]) == 0
    assert "warning" not in capsys.readouterr().err  # the run's own settings: no override
    result = json.loads(report.read_text())
    assert result["n"] == 3 and len(result["task_scores"]) == 3  # train.eval_n of the run


def test_sao_eval_step_scores_the_policy_a_checkpoint_holds(tiny_policy_dir, tmp_path):
    config = small_config(
        tiny_policy_dir, "train.steps=2", "train.checkpoint_every=1", "train.keep_checkpoints=3"
    )
    run = tmp_path / "run"
    run.mkdir()
    train(config, run, progress=False)
    save_config(config, run / "config.yaml")  # as `sao train` leaves it
    start = load_policy(tiny_policy_dir)[0].state_dict()
    end = load_policy(run / "policy")[0].state_dict()
    step_0 = checkpoint_policy_state(checkpoint_dir(run, 0))
    step_2 = checkpoint_policy_state(checkpoint_dir(run, 2))
    assert all(torch.equal(step_0[k], start[k]) for k in start)
    assert all(torch.equal(step_2[k], end[k]) for k in end)
    assert not all(torch.equal(step_0[k], step_2[k]) for k in start)  # it trained in between
    report = tmp_path / "eval.json"
    assert main(["eval", "--run", str(run), "--step", "1", "--n", "2", "--json", str(report)]) == 0
    result = json.loads(report.read_text())
    assert result["weights_from"] == str(run / "checkpoints" / "step_1") and result["n"] == 2


def test_warm_start_learns_from_given_demonstrations_instead_of_the_teacher(tmp_path, monkeypatch):
    import sao.warmstart.sft as warmstart

    def no_teacher(*args, **kwargs):
        raise AssertionError("the environment's teacher was asked for demonstrations")

    seen = []

    def record(model, tokenizer, examples, config, **kwargs):
        seen.append(examples)
        return [1.0]

    monkeypatch.setattr(warmstart, "make_demonstrations", no_teacher)
    monkeypatch.setattr(warmstart, "train_sft", record)
    given = [[("Q: 1+1=?\n", False), ("<answer>2</answer>", True)]]
    out = tmp_path / "policy"
    config = SFTConfig(steps=2, batch_size=4, warmup_steps=1, num_demonstrations=8)
    warm_start("calc", out, config, progress=False, demonstrations=given)
    assert seen == [given]
    assert (out / "config.json").exists()
