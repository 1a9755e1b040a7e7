"""The learner: one training step on a batch of completed trajectories.

    collate -> critic values -> advantages (-> whitening) -> actor update -> K critic updates

The estimator and the policy loss are the ones `algo.advantage` and `algo.policy_loss` name in
`sao.core.registry`. The actor update is one DIS step against the rollout log-probs, or, for the
PPO-clip baselines, mini-batch steps against old log-probs the learner computes first
(`sao.learner.actor_update`).

`Learner.step` reads top to bottom like the algorithm (SAO_SPEC sections 3-6); the math lives in
`sao.core`, the forward passes in `sao.models`. Under a process group of several ranks each rank
trains its part of every update, with the whole batch's normalisers and metrics
(`sao.learner.data_parallel`); with one process that part is the whole batch.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Any

import torch
from torch import Tensor, nn

from sao.config import SAOConfig
from sao.core.advantages import broadcast_to_tokens
from sao.core.algorithms import value_targets
from sao.core.registry import AdvantageInputs, advantage_estimator, policy_loss
from sao.learner.actor_update import actor_update, update_rows
from sao.learner.chunking import (
    chunked_forward,
    chunked_padding_frac,
    packed_forward,
    packed_padding_frac,
    packing_cost_for,
)
from sao.learner.critic_update import critic_update
from sao.learner.data_parallel import RankGroup, RankShare
from sao.learner.optim import (
    build_optimizer,
    gradient_norm,
    trainable_parameters,
)
from sao.learner.precision import (
    mixed_precision_forward,
    prepare_model,
    recomputed_per_pass,
    resolve_device,
)
from sao.learner.settings import LearnerConfig
from sao.learner.sharding import (
    full_state_dict,
    load_model_state,
    load_optimizer_state,
    optimizer_state,
)
from sao.models.critic import ValueModel, attention_parameter_names, freeze_modules
from sao.models.lora import (
    adapter_state_dict,
    has_adapters,
    load_adapter_state,
    merged_state_dict,
)
from sao.models.packed_attention import use_packed_attention
from sao.models.policy import token_logprobs_and_entropy
from sao.trajectory import Batch, Trajectory, collate


class Learner:
    """Holds the policy, the optional critic, their optimizers and the weight version.

    Both models run in eval mode: the learner's log-probs must be the same function of the
    weights as the engine's (no dropout), or the DIS ratio of an unchanged policy would not be 1.

    Args:
        policy: an fp32 HF causal LM; trained in place.
        config: the learner's sections (`LearnerConfig`), or a run's config to take them from.
        critic: the value model when `config.critic.enabled`; None builds one from `policy`.
            `config.critic.freeze` is applied to it here (the frozen names are kept in
            `frozen_critic_parameters`).
        pad_token_id: id used to right-pad batches (masked out, never trained on).
        pack: run the forward passes over packed sequences (`sao.learner.chunking`), switching
            the policy and critic to segment-by-segment attention where they accept it
            (`sao.models.packed_attention`); False runs length-sorted padded passes instead
            (the same result, more padding computed).

    Attributes:
        version: the policy's weight version; 0 at start, +1 per `step`.
        skipped_steps: optimizer steps skipped because a loss or gradient was not finite.
        packing_cost: what a packed row costs these models (`sao.learner.chunking`).
        ranks: this process's place among the learner's ranks (`sao.learner.data_parallel`).
    """

    def __init__(
        self,
        policy: nn.Module,
        config: LearnerConfig | SAOConfig,
        critic: ValueModel | None = None,
        pad_token_id: int = 0,
        pack: bool = True,
    ) -> None:
        _require_fp32(policy, "policy")
        self.config = config = LearnerConfig.of(config)
        self.advantage = advantage_estimator(config.algo.advantage)
        self.policy_loss = policy_loss(config.algo.policy_loss)
        self.device = resolve_device(config.device)
        self.ranks = RankGroup(self.device)
        if pack:
            use_packed_attention(policy)
        self.policy = prepare_model(policy, self.device, config.gradient_checkpointing)
        self.pad_token_id = pad_token_id
        self.pack = pack
        self.version = 0
        self.skipped_steps = {"actor": 0, "critic": 0}
        self.lora = has_adapters(policy)
        self.actor_optimizer = build_optimizer(trainable_parameters(policy), config.actor)

        self.critic: ValueModel | None = None
        self.critic_optimizer: torch.optim.AdamW | None = None
        self.frozen_critic_parameters: list[str] = []
        self._critic_norm_sets: dict[str, list[nn.Parameter]] = {}
        if config.critic.enabled:
            critic = critic if critic is not None else ValueModel.from_policy(policy)
            _require_fp32(critic, "critic")
            self.critic = critic.to(self.device).eval()
            self.frozen_critic_parameters = freeze_modules(self.critic, list(config.critic.freeze))
            if pack:
                use_packed_attention(self.critic)
            prepare_model(self.critic, self.device, config.gradient_checkpointing)
            attention = attention_parameter_names(self.critic)
            self._critic_norm_sets = {
                "critic/grad_norm_shared": [
                    p for n, p in self.critic.named_parameters() if n not in attention
                ],
                "critic/grad_norm_all": list(self.critic.parameters()),
            }
            self.critic_optimizer = build_optimizer(
                trainable_parameters(self.critic), config.critic.optim
            )
        elif critic is not None:
            raise ValueError("Learner: a critic was given but config.critic.enabled is false")

        self.packing_cost = packing_cost_for(self.policy, *([self.critic] if self.critic else []))

        # The estimator's state across steps (the running mean's history), checkpointed.
        make_state = self.advantage.make_state
        self.baseline = make_state(config.algo) if make_state is not None else None

    def step(self, trajectories: Sequence[Trajectory]) -> dict[str, float]:
        """Train on `trajectories` (the actor update, K critic updates); return the metrics.

        Staleness is measured against the version before this step; `version` then grows by 1.
        """
        if not trajectories:
            raise ValueError("Learner.step: no trajectories")
        algo, critic_cfg = self.config.algo, self.config.critic
        whole = collate(trajectories, self.pad_token_id)
        metrics = rollout_metrics(trajectories, whole, self.version)

        # This rank's part of every update (all of the batch with one rank); losses and
        # metrics below are still the whole batch's (`sao.learner.data_parallel`).
        share = self.ranks.share(
            [len(t) for t in trajectories], update_rows(algo, len(whole.scores))
        )
        batch = self._to_device(share.local_batch(whole))
        mask = batch.action_mask
        metrics |= share.metrics()
        metrics["perf/padding_frac"] = self._computed_padding_frac(batch)

        # Critic values. This forward keeps its graph: it is also the first critic update's
        # forward (the critic does not change before then), which saves one full pass.
        critic_values = None
        if self.critic is not None:
            with torch.set_grad_enabled(critic_cfg.k_updates > 0):
                critic_values = self._forward(self.critic, batch)
        values = critic_values.detach() if critic_values is not None else None

        advantages, returns = self._advantages(batch, whole, share, trajectories, values)
        # The estimator's own scale, before any whitening. Adam divides each update by the
        # gradient's running RMS, so this scale barely moves the step (measured:
        # docs/notebook/2026-12-02-calc-lambda-whitening.md); it is a diagnostic of the advantages,
        # not of the step size.
        metrics["actor/advantage_raw_std"] = math.sqrt(
            max(self.ranks.masked_variance(advantages, mask), 0.0)
        )
        if algo.whiten_advantages:
            advantages = self.ranks.whiten(advantages, mask)
        metrics["actor/advantage_mean"] = self.ranks.masked_mean(advantages, mask)

        # The actor: log-probs of the tempered distribution the engine sampled from; one DIS
        # update, or PPO clip in mini-batches against the learner's old log-probs.
        actor = actor_update(
            self._policy_forward,
            batch,
            advantages,
            self.actor_optimizer,
            self.policy_loss,
            algo,
            self.config.actor.grad_clip,
            share.updates,
            self.ranks,
        )
        self.skipped_steps["actor"] += actor.skipped
        metrics |= actor.metrics
        metrics["actor/skipped_steps"] = float(self.skipped_steps["actor"])

        # K critic updates on the same batch, against the same returns.
        if self.critic is not None and critic_values is not None and returns is not None:
            # The first reuses the forward the advantages came from (`critic_values`).
            critic_steps = [
                self.critic_step(batch, returns, critic_values if k == 0 else None, values)
                for k in range(critic_cfg.k_updates)
            ]
            # Loss, clip fraction and gradient norm: means over the K updates (none with K=0).
            for key in critic_steps[0] if critic_steps else ():
                metrics[key] = sum(m[key] for m in critic_steps) / len(critic_steps)
            # Over action tokens, with the values the advantages used (before this step's
            # critic updates): a held-out measure. Its denominator moves with the reward rate
            # and the trajectories' lengths, so it is logged too.
            metrics["critic/vf_explained_var"] = self.ranks.explained_variance(
                values, returns, mask
            )
            metrics["critic/returns_var"] = self.ranks.masked_variance(returns, mask)
            metrics["critic/values_mean"] = self.ranks.masked_mean(values, mask)
            metrics["critic/returns_mean"] = self.ranks.masked_mean(returns, mask)
            metrics["critic/skipped_steps"] = float(self.skipped_steps["critic"])

        self.version += 1
        return metrics

    def critic_step(
        self,
        batch: Batch,
        returns: Tensor,
        values: Tensor | None = None,
        old_values: Tensor | None = None,
    ) -> dict[str, float]:
        """One critic-only update towards `returns` on `batch` (on the learner's device);
        the actor and the version stay as they are. Returns its metrics.

        `values`: the batch's critic values with their graph, when the caller already ran that
        forward (else it runs here). `old_values`: the values before this step, around which
        `critic.value_clip` clips. The loss, its metrics and both gradient-norm sets of
        `_critic_norms` (NaN when a non-finite loss skipped the backward pass) are the whole
        batch's over the learner's ranks.
        """
        if self.critic is None or self.critic_optimizer is None:
            raise ValueError("Learner.critic_step: this learner has no critic")
        critic_cfg, agg = self.config.critic, self.config.algo.agg
        if values is None:
            values = self.critic_values(batch, grad=True)
        metrics, applied = critic_update(
            values,
            returns,
            batch.action_mask,
            self.critic_optimizer,
            critic_cfg.optim.grad_clip,
            agg,
            old_values,
            critic_cfg.value_clip if old_values is not None else None,
            self.ranks,
            self._critic_norms,
        )
        self.skipped_steps["critic"] += not applied
        return dict.fromkeys(self._critic_norm_sets, math.nan) | metrics

    def critic_values(self, batch: Batch, grad: bool = False) -> Tensor:
        """`[B, T]` critic values of `batch` (on the learner's device), with their graph when
        `grad`."""
        if self.critic is None:
            raise ValueError("Learner.critic_values: this learner has no critic")
        with torch.set_grad_enabled(grad):
            return self._forward(self.critic, batch)

    def to_device(self, trajectories: Sequence[Trajectory]) -> Batch:
        """`trajectories` collated and moved to the learner's device."""
        return self._to_device(collate(trajectories, self.pad_token_id))

    def _critic_norms(self) -> dict[str, float]:
        """The critic's raw gradient norm over two fixed parameter sets, the same in every preset.

        `critic/grad_norm_shared`: the parameters outside attention (MLP/MoE, norms, value head),
        which every critic preset trains, so frozen and full critics compare like with like.
        `critic/grad_norm_all`: every critic parameter; a frozen one has no gradient and counts 0,
        so with frozen attention it equals the shared norm. (`critic/grad_norm` is the norm the
        optimizer clips: over the trainable parameters, whichever they are.)
        """
        return {name: gradient_norm(params) for name, params in self._critic_norm_sets.items()}

    def _advantages(
        self,
        batch: Batch,
        whole: Batch,
        share: RankShare,
        trajectories: Sequence[Trajectory],
        values: Tensor | None,
    ) -> tuple[Tensor, Tensor | None]:
        """`(advantages [B, T], critic targets [B, T] or None)` of this rank's rows `batch`.

        Targets use `lambda_critic` (`value_targets`); advantages are the registered
        estimator's. Token and step estimators read each row alone; sequence ones read the
        episode returns (outcome plus turn rewards) of the `whole` batch and give this rank's
        rows their scores (a running mean moves once per step, on every rank alike).
        """
        algo, mask, estimator = self.config.algo, batch.action_mask, self.advantage
        returns = None
        if values is not None:
            returns = value_targets(estimator, batch.rewards, values, mask, algo)
        inputs = AdvantageInputs(
            rewards=batch.rewards,
            values=values,
            action_mask=mask,
            episode_returns=whole.episode_returns,
            group_ids=group_id_tensor(trajectories) if estimator.needs_groups else None,
            state=self.baseline,
        )
        advantages = estimator.fn(inputs, algo)
        if estimator.level == "sequence":
            mine = advantages[torch.tensor(share.rows, dtype=torch.long)].to(mask.device)
            advantages = broadcast_to_tokens(mine, mask)
        return advantages, returns

    def _policy_forward(self, batch: Batch) -> tuple[Tensor, Tensor]:
        """`(logprobs, entropy)` `[B, T]` of the policy at the rollout temperature."""
        temperature = self.config.temperature
        return self._forward(
            lambda ids, attn, pos: token_logprobs_and_entropy(
                self.policy, ids, attn, temperature, pos
            ),
            batch,
        )

    def _forward(
        self, fn: Callable[[Tensor, Tensor | None, Tensor | None], Any], batch: Batch
    ) -> Any:
        """`fn(input_ids, attention_mask, packed_positions)` over the batch as `[B, T]` outputs.

        Packed (`pack=True`): the sequences run side by side in rows of nearly equal fill, so
        almost no padding is computed. Otherwise: length-sorted passes of padded rows, each
        trimmed to its longest. Both equal one padded full-batch pass up to float rounding.
        With several ranks, each runs as many passes as the busiest one (FSDP2 gathers the
        weights in every pass).
        """
        fn = mixed_precision_forward(fn, self.config.precision, self.device)
        if self.config.recompute_passes:
            fn = recomputed_per_pass(fn)
        max_tokens = self.config.micro_batch_tokens
        if self.pack:
            out = packed_forward(
                lambda ids, pos: fn(ids, None, pos),
                batch.input_ids,
                batch.attention_mask,
                max_tokens,
                self.packing_cost,
            )
        else:
            out = chunked_forward(
                lambda ids, attn: fn(ids, attn, None),
                batch.input_ids,
                batch.attention_mask,
                max_tokens,
            )
        lengths = batch.attention_mask.sum(dim=1).tolist()
        cost = self.packing_cost if self.pack else None
        return self.ranks.match_passes(fn, out, lengths, max_tokens, cost)

    def _computed_padding_frac(self, batch: Batch) -> float:
        """The fraction of the tokens each of this learner's forward passes computes that is
        padding (over every rank's passes)."""
        lengths = batch.attention_mask.sum(dim=1).tolist()
        max_tokens = self.config.micro_batch_tokens
        if self.pack:
            frac = packed_padding_frac(lengths, max_tokens, self.packing_cost)
        else:
            frac = chunked_padding_frac(lengths, max_tokens)
        return self.ranks.padding_frac(sum(lengths), frac)

    def _to_device(self, batch: Batch) -> Batch:
        moved = {f.name: getattr(batch, f.name).to(self.device) for f in dataclasses.fields(batch)}
        return Batch(**moved)

    def policy_state_dict(self) -> dict[str, Tensor]:
        """A detached CPU copy of the policy's weights, safe to publish while training goes on
        (with LoRA, the plain model's weights with the adapters merged in)."""
        if self.lora:
            return merged_state_dict(self.policy)
        return full_state_dict(self.policy)

    def state_dict(self, snapshot: bool = True) -> dict[str, Any]:
        """Everything needed to resume: weights, optimizers, baseline, version, skip counters.

        Whole even when the models are sharded (then every rank must call it), in the layout an
        unsharded learner writes, so a checkpoint resumes on any number of ranks.

        Args:
            snapshot: a copy that later steps leave alone (the default). `False` gives the live
                tensors wherever they are whole already (Adam's moments are updated in place):
                for a checkpoint written before the next step, it saves holding a second copy
                of every weight and optimizer state while the file is written.
        """
        critic, critic_optimizer = self.critic, self.critic_optimizer
        # With LoRA only the adapters (and the value head) train: the base is model.path's.
        weights = adapter_state_dict if self.lora else partial(full_state_dict, copy=snapshot)
        take = copy.deepcopy if snapshot else _as_is
        return {
            "version": self.version,
            "skipped_steps": dict(self.skipped_steps),
            "policy": weights(self.policy),
            "actor_optimizer": take(optimizer_state(self.policy, self.actor_optimizer)),
            "critic": weights(critic) if critic is not None else None,
            "critic_optimizer": (
                take(optimizer_state(critic, critic_optimizer))
                if critic is not None and critic_optimizer is not None
                else None
            ),
            "baseline": take(self.baseline.state_dict()) if self.baseline is not None else None,
            "lora": self.config.lora.model_dump() if self.lora else None,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore from `state_dict()`; the learner must be built with the same config.

        Raises:
            ValueError: naming a missing key, or a critic / baseline the state has but this
                learner lacks (or the reverse).
        """
        required = ("version", "skipped_steps", "policy", "actor_optimizer", "critic")
        missing = [k for k in (*required, "critic_optimizer", "baseline") if k not in state]
        if missing:
            raise ValueError(f"Learner.load_state_dict: missing key(s) {missing}")
        for key, mine in (("critic", self.critic), ("baseline", self.baseline)):
            if (state[key] is None) != (mine is None):
                have = "has" if state[key] is not None else "lacks"
                raise ValueError(
                    f"Learner.load_state_dict: the state {have} a {key!r} but this learner "
                    f"{'does not' if mine is None else 'does'}"
                )
        load_weights = load_adapter_state if self.lora else load_model_state
        load_weights(self.policy, state["policy"])
        load_optimizer_state(self.policy, self.actor_optimizer, state["actor_optimizer"])
        if self.critic is not None and self.critic_optimizer is not None:
            load_weights(self.critic, state["critic"])
            load_optimizer_state(self.critic, self.critic_optimizer, state["critic_optimizer"])
        if self.baseline is not None:
            self.baseline.load_state_dict(state["baseline"])
        self.version = int(state["version"])
        self.skipped_steps = {k: int(v) for k, v in state["skipped_steps"].items()}


def rollout_metrics(
    trajectories: Sequence[Trajectory], batch: Batch, version: int
) -> dict[str, float]:
    """Facts about the batch itself: rewards, staleness against `version`, turns, and the
    right-padded batch's padding (`perf/batch_padding_frac`; what the learner's passes compute
    is `perf/padding_frac`)."""
    staleness = [t.staleness(version) for t in trajectories]
    n = len(trajectories)
    return {
        "rollout/reward_mean": float(batch.scores.float().mean()),
        "rollout/staleness_mean": sum(staleness) / n,
        "rollout/staleness_max": float(max(staleness)),
        "rollout/turns_mean": sum(len(t.turn_spans) for t in trajectories) / n,
        "rollout/action_tokens_mean": sum(t.num_action_tokens for t in trajectories) / n,
        "rollout/length_mean": sum(len(t) for t in trajectories) / n,
        "perf/batch_padding_frac": batch.padding_frac,
    }


def group_id_tensor(trajectories: Sequence[Trajectory]) -> Tensor:
    """`[B]` integer group index per trajectory from `metadata["group_id"]` (any hashable id).

    Raises:
        ValueError: naming the first trajectory without a `group_id`.
    """
    index: dict[Hashable, int] = {}
    out = []
    for i, traj in enumerate(trajectories):
        if "group_id" not in traj.metadata:
            raise ValueError(
                f"group advantages: trajectory {i} has no metadata['group_id'] "
                f"(metadata keys: {sorted(traj.metadata)})"
            )
        out.append(index.setdefault(traj.metadata["group_id"], len(index)))
    return torch.tensor(out, dtype=torch.long)


def _require_fp32(model: nn.Module, what: str) -> None:
    dtypes = {p.dtype for p in model.parameters()}
    if dtypes != {torch.float32}:
        names = sorted(str(d).removeprefix("torch.") for d in dtypes)
        raise ValueError(f"Learner: the {what} must be fp32 to train, got {names}")


def _as_is(value: Any) -> Any:
    return value
