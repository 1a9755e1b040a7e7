"""The agent loop: many multi-turn episodes driven through one engine at once.

Each episode alternates: the engine samples an action (stopping at one of the environment's
closing tags or EOS) -> the environment steps on the action text -> its observation is appended as
inserted tokens (mask 0) -> the episode is resubmitted with the longer context. Prompts and
observations are laid out by `sao.rollout.rendering.TurnRenderer` (the tokenizer's chat template
when it has one) and tokenized once: each resubmitted context extends the previous one's ids
exactly. A closing tag that is an added token of the tokenizer stops as a token id; otherwise
(a BPE vocabulary, where `</python>` is several tokens) it stops as a string on the decoded tail.
When the environment says done (or a budget runs out) the episode becomes a validated `Trajectory`.

Environment steps (tool calls in the sandbox take tens of milliseconds) run on a small thread pool
(`env_workers`), so the engine keeps decoding the other episodes meanwhile: an episode waiting on
its tool is simply not in the engine's batch. `env_workers=0` steps environments inline, which
makes a run bit-for-bit reproducible (the order in which tools finish decides which sequences
share a decode batch, and batch composition shifts floating-point results).

With the environment-latency overlay (`env.latency`, `sao.rollout.latency`), each environment
step's result is held back for a sampled extra time before the episode continues: the episode
waits in a list with its release time (no thread sleeps on it), the engine decodes the others
meanwhile, and the loop sleeps only when it has nothing else to do. The clock and sleep are
injectable so tests can drive the wait without timing anything.

Nothing an environment does can stop the loop: an exception in `step` ends that episode with
reward 0 and `end_reason = "env_error"` (the message kept in `metadata["error"]`), one in `reset`
(nothing sampled yet) leaves no trajectory and is listed in `dropped`; both are logged and counted
in `env_errors`. The reward 0 is not the policy's doing: training keeps such a trajectory on disk
and never trains on it (`sao.runtime.env_errors`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from sao.envs.base import END_MAX_TOKENS, Environment, Task
from sao.rollout.interface import InferenceEngine
from sao.rollout.rendering import TurnRenderer, single_token_ids
from sao.rollout.requests import Completion, SamplingParams
from sao.trajectory import Trajectory

log = logging.getLogger(__name__)

END_ENV_ERROR = "env_error"
END_EOS = "eos"


@dataclass
class Episode:
    """The growing state of one in-flight trajectory."""

    episode_id: str
    task: Task
    env: Environment
    metadata: dict[str, Any]
    token_ids: list[int] = field(default_factory=list)
    action_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    turn_spans: list[tuple[int, int]] = field(default_factory=list)
    # One per environment step (`StepResult.action_reward`), in turn order.
    action_rewards: list[float] = field(default_factory=list)
    tool_calls: int = 0
    # Tool calls the environment reports as failed (`info["tool_error"]`: a timeout, a crash).
    tool_errors: int = 0
    format_errors: int = 0
    started_at: float = field(default_factory=time.time)
    last_info: dict[str, Any] = field(default_factory=dict)

    def append_inserted(self, ids: list[int]) -> None:
        self.token_ids += ids
        self.action_mask += [0] * len(ids)
        self.logprobs += [0.0] * len(ids)
        self.versions += [-1] * len(ids)

    def append_action(self, completion: Completion) -> None:
        start = len(self.token_ids)
        self.token_ids += completion.token_ids
        self.action_mask += [1] * len(completion.token_ids)
        self.logprobs += completion.logprobs
        self.versions += completion.versions
        self.turn_spans.append((start, len(self.token_ids)))


def _turn_rewards(episode: Episode) -> tuple[float, ...] | None:
    """The episode's action rewards, one per turn (0 for a turn the environment never stepped,
    e.g. one cut at the token budget); None when every one is 0, as for most environments."""
    rewards = episode.action_rewards[: len(episode.turn_spans)]
    if not any(rewards):
        return None
    return tuple(rewards) + (0.0,) * (len(episode.turn_spans) - len(rewards))


class AgentLoop:
    """Keeps episodes in flight on `engine` and returns each trajectory the moment it completes.

    Args:
        engine: the rollout engine (shared by all episodes); any `InferenceEngine`.
        tokenizer: the policy's tokenizer; tool tags may be single tokens or plain text.
        env_factory: makes a fresh environment for each episode.
        sampling: temperature / top-p / max new tokens per action turn.
        max_tokens: total trajectory length at which an episode ends with reward 0.
        env_name: recorded in each trajectory's metadata.
        env_workers: threads stepping environments off the decode path (0: inline).
        env_latency: draws the extra seconds each environment step waits (the latency overlay);
            None waits nothing.
        clock: monotonic seconds (injectable for tests), used only by the latency overlay.
        sleep: how the loop idles while only delayed episodes remain (injectable for tests).
    """

    def __init__(
        self,
        engine: InferenceEngine,
        tokenizer: PreTrainedTokenizerBase,
        env_factory: Callable[[], Environment],
        sampling: SamplingParams,
        max_tokens: int,
        env_name: str = "",
        env_workers: int = 0,
        env_latency: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.engine = engine
        self.tokenizer = tokenizer
        self.renderer = TurnRenderer(tokenizer)
        self.env_factory = env_factory
        self.sampling = sampling
        self.max_tokens = max_tokens
        self.env_name = env_name
        self._episodes: dict[str, Episode] = {}
        self._finished: list[Trajectory] = []
        self._stops_cache: dict[tuple[str, ...], tuple[list[int], list[str]]] = {}
        self.env_errors = 0
        self._pool = ThreadPoolExecutor(env_workers, "sao-env") if env_workers > 0 else None
        self._env_pending: dict[Future, tuple[Episode, bool]] = {}
        self._env_latency = env_latency
        self._clock, self._sleep = clock, sleep
        # Environment results held back by the latency overlay: (release time, episode, eos, result).
        self._delayed: list[tuple[float, Episode, bool, Future]] = []
        self._waits_paused_at: float | None = None
        self.env_latency_s = 0.0
        """Extra seconds the overlay has added over every environment step so far."""
        self.decode_s = 0.0
        """Seconds spent in the engine's decode steps so far."""
        self.decode_steps = 0
        self.decoding_sum = 0
        """Decode steps with a request at the engine, and the episodes with one, summed over them."""
        # Episodes that failed before sampling anything: no trajectory, but callers must know.
        self.dropped: list[dict[str, Any]] = []

    @property
    def num_in_flight(self) -> int:
        return len(self._episodes)

    def start(self, episode_id: str, task: Task, metadata: dict[str, Any] | None = None) -> None:
        """Begin an episode for `task`; `metadata` (e.g. group id, index) rides along."""
        if episode_id in self._episodes:
            raise ValueError(f"AgentLoop.start: episode_id {episode_id!r} is already in flight")
        meta = {"task_id": task.task_id, "env": self.env_name, **(metadata or {})}
        try:
            env = self.env_factory()
            prompt = env.reset(task)
        except Exception as err:  # an environment bug must not take the rollout side down
            self._env_failed(episode_id, meta, err, stage="reset")
            return
        episode = Episode(episode_id, task, env, meta)
        episode.append_inserted(self.renderer.prompt_ids(prompt))
        self._episodes[episode_id] = episode
        self._submit(episode)

    def step(self) -> list[Trajectory]:
        """One engine decode step (plus finished tool calls); returns completed trajectories."""
        idle = not self.engine.has_work()
        self._harvest_env_steps(block=idle)
        self._release_delayed(block=idle and not self._env_pending)
        decoding = len(self._episodes) - len(self._env_pending) - len(self._delayed)
        t0 = time.perf_counter()
        completions = self.engine.step()
        self.decode_s += time.perf_counter() - t0
        if decoding > 0:
            self.decode_steps += 1
            self.decoding_sum += decoding
        for completion in completions:
            episode = self._episodes.get(completion.request_id)
            if episode is not None:
                self._on_action(episode, completion)
        done, self._finished = self._finished, []
        return done

    def close(self) -> None:
        """Stop the environment threads (waits for running tool calls)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def run(
        self,
        tasks: list[tuple[str, Task, dict[str, Any]]],
        on_finished: Callable[[int], None] | None = None,
    ) -> list[Trajectory]:
        """Run the given episodes to completion (all in flight at once); return in completion order.

        `on_finished(k)` is called whenever `k` more episodes have finished (e.g. a progress bar).
        """
        for episode_id, task, meta in tasks:
            self.start(episode_id, task, meta)
        out: list[Trajectory] = []
        while self._episodes or self._finished:
            done = self.step()
            out += done
            if done and on_finished is not None:
                on_finished(len(done))
        return out

    # ------------------------------------------------------------------ internals
    def _stops(self, env: Environment) -> tuple[list[int], list[str]]:
        """`(stop token ids, stop strings)` for the environment's closing tags."""
        key = tuple(env.stop_tags)
        if key not in self._stops_cache:
            ids = single_token_ids(self.tokenizer, key)
            self._stops_cache[key] = (ids, []) if ids is not None else ([], list(key))
        return self._stops_cache[key]

    def _submit(self, episode: Episode) -> None:
        room = self.max_tokens - len(episode.token_ids)
        if room <= 0:
            self._finish(episode, reward=0.0, end_reason=END_MAX_TOKENS)
            return
        params = SamplingParams(
            temperature=self.sampling.temperature,
            top_p=self.sampling.top_p,
            max_new_tokens=min(self.sampling.max_new_tokens, room),
        )
        stop_ids, stop_strings = self._stops(episode.env)
        self.engine.submit(episode.episode_id, episode.token_ids, params, stop_ids, stop_strings)

    def _on_action(self, episode: Episode, completion: Completion) -> None:
        episode.append_action(completion)
        ids = completion.token_ids
        eos = self.tokenizer.eos_token_id
        ended_on_eos = bool(ids) and ids[-1] == eos
        text = self.tokenizer.decode(ids[:-1] if ended_on_eos else ids, skip_special_tokens=False)
        if self._pool is None:
            future: Future = Future()
            try:
                future.set_result(episode.env.step(text))
            except Exception as err:
                future.set_exception(err)
            self._after_env_step(episode, ended_on_eos, future)
        else:
            self._env_pending[self._pool.submit(episode.env.step, text)] = (episode, ended_on_eos)

    def _harvest_env_steps(self, block: bool) -> None:
        if not self._env_pending:
            return
        pending = list(self._env_pending)
        done, _ = wait(pending, timeout=0.05 if block else 0, return_when=FIRST_COMPLETED)
        # Submission order, not completion order, keeps resubmission as stable as it can be.
        for future in [f for f in pending if f in done]:
            episode, ended_on_eos = self._env_pending.pop(future)
            self._after_env_step(episode, ended_on_eos, future)

    def pause_waits(self) -> None:
        """Stop the overlay's waits from running down until `resume_waits`: while the rollout
        side is paused for an eval off the training clock, a tool call must not finish for free.
        Call only while nothing steps the loop."""
        if self._waits_paused_at is None:
            self._waits_paused_at = self._clock()

    def resume_waits(self) -> None:
        """Let the overlay's waits run again, each held-back episode released as much later as
        the pause lasted."""
        if self._waits_paused_at is None:
            return
        paused = self._clock() - self._waits_paused_at
        self._waits_paused_at = None
        self._delayed = [(ready + paused, *rest) for ready, *rest in self._delayed]

    def _after_env_step(self, episode: Episode, ended_on_eos: bool, future: Future) -> None:
        """Act on an environment step now, or hold it back by the overlay's sampled latency."""
        delay = self._env_latency() if self._env_latency is not None else 0.0
        if delay <= 0.0:
            self._on_env_result(episode, ended_on_eos, future)
            return
        self.env_latency_s += delay
        self._delayed.append((self._clock() + delay, episode, ended_on_eos, future))

    def _release_delayed(self, block: bool) -> None:
        """Continue every held-back episode whose time is up; with `block` and none due, sleep
        until the first is due (at most 50 ms, so a new engine request is not kept waiting)."""
        if not self._delayed:
            return
        now = self._clock()
        if block:
            first = min(ready for ready, *_ in self._delayed)
            if first > now:
                self._sleep(min(0.05, first - now))
                now = self._clock()
        due = [item for item in self._delayed if item[0] <= now]
        if not due:
            return
        self._delayed = [item for item in self._delayed if item[0] > now]
        for _, episode, ended_on_eos, future in due:
            self._on_env_result(episode, ended_on_eos, future)

    def _on_env_result(self, episode: Episode, ended_on_eos: bool, future: Future) -> None:
        try:
            result = future.result()
        except Exception as err:
            self._env_failed(
                episode.episode_id, episode.metadata, err, stage="step", episode=episode
            )
            return
        episode.tool_calls += int(bool(result.info.get("tool_called")))
        episode.tool_errors += int(bool(result.info.get("tool_error")))
        episode.action_rewards.append(result.action_reward)
        episode.format_errors += int(bool(result.info.get("format_error")))
        episode.last_info = {k: v for k, v in result.info.items() if _is_plain(v)}
        if result.done:
            self._finish(episode, result.reward, result.info.get("end_reason", "done"))
        elif ended_on_eos:
            self._finish(episode, reward=0.0, end_reason=END_EOS)
        else:
            obs = self.renderer.observation_ids(result.observation)
            if len(episode.token_ids) + len(obs) >= self.max_tokens:
                # No room left to act on the observation: end here, within the budget.
                self._finish(episode, reward=0.0, end_reason=END_MAX_TOKENS)
                return
            episode.append_inserted(obs)
            self._submit(episode)

    def _finish(self, episode: Episode, reward: float, end_reason: str) -> None:
        self._episodes.pop(episode.episode_id, None)
        now = time.time()
        meta = {
            **episode.metadata,
            "end_reason": end_reason,
            "turns": len(episode.turn_spans),
            "tool_calls": episode.tool_calls,
            "tool_errors": episode.tool_errors,
            "format_errors": episode.format_errors,
            # The environment's last step info (scalars only), e.g. a judge's verdict.
            "info": episode.last_info,
            "started_at": episode.started_at,
            "finished_at": now,
            "duration_s": now - episode.started_at,
        }
        self._finished.append(
            Trajectory(
                token_ids=episode.token_ids,
                action_mask=episode.action_mask,
                rollout_logprobs=episode.logprobs,
                policy_versions=episode.versions,
                reward=reward,
                turn_spans=episode.turn_spans,
                turn_rewards=_turn_rewards(episode),
                metadata=meta,
            )
        )

    def _env_failed(
        self,
        episode_id: str,
        meta: dict[str, Any],
        err: Exception,
        stage: str,
        episode: Episode | None = None,
    ) -> None:
        self.env_errors += 1
        log.warning("environment %s failed in %s for %s: %r", self.env_name, stage, episode_id, err)
        self._episodes.pop(episode_id, None)
        if episode is None or not any(episode.action_mask):
            # Nothing was sampled: there is no trajectory to train on, only the error to report.
            self.dropped.append({**meta, "error": f"{type(err).__name__}: {err}"})
            return
        episode.metadata["error"] = f"{type(err).__name__}: {err}"
        self._finish(episode, reward=0.0, end_reason=END_ENV_ERROR)


def _is_plain(value: Any) -> bool:
    """Whether a step-info value is kept in trajectory metadata: a scalar, or a flat list of them
    (e.g. code_repair's command history); anything else might not serialise to JSON."""

    def scalar(v: Any) -> bool:
        return v is None or isinstance(v, str | int | float)

    return scalar(value) or (isinstance(value, list | tuple) and all(map(scalar, value)))
