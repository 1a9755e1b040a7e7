"""Environment errors: set aside rather than trained, replaced by the scheduler, counted, and a
run stopped when too many (`sao.runtime.env_errors`), on stub trajectories and a stub agent loop."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from stub_trajectories import stub_trajectory

from sao.envs.base import Task
from sao.plumbing.stopped import RunStopped
from sao.runtime.env_errors import (
    GROUP_ENV_ERROR,
    EnvErrorWatch,
    is_env_error,
    is_set_aside,
    take_batch,
)
from sao.runtime.scheduler import Scheduler


def traj(index: int, errored: bool = False, group_id: int | None = None) -> Any:
    meta: dict[str, Any] = {"index": index, "end_reason": "env_error" if errored else "answer"}
    if errored:
        meta["error"] = "RuntimeError: boom"
    if group_id is not None:
        meta["group_id"] = group_id
    return stub_trajectory(0.0, meta)


# ------------------------------------------------------------------ the watch
def test_the_share_is_judged_only_over_a_full_window():
    watch = EnvErrorWatch(window=4, max_rate=0.25)
    watch.observe([traj(0, errored=True), traj(1, errored=True), traj(2)])
    assert watch.stop_reason() is None  # 2 of 3, but only 3 episodes seen
    watch.observe([traj(3)])
    reason = watch.stop_reason()
    assert reason is not None
    assert reason.startswith("2 of the last 4 episodes ended in an environment error (50%)")
    assert "train.max_env_error_rate=0.25" in reason
    assert watch.step_count() == 2 and watch.step_count() == 0


def test_a_share_at_the_rate_does_not_stop_and_older_episodes_leave_the_window():
    watch = EnvErrorWatch(window=4, max_rate=0.25, recent=[True, True, False])
    watch.observe([traj(0)])
    assert watch.stop_reason() is not None  # the resumed run's two errors are still in view
    watch.observe([traj(1)])
    assert watch.stop_reason() is None  # 1 of 4 = the rate: not more than it
    assert watch.step_count() == 0  # errors before this invocation are not this step's


def test_a_window_of_nothing_but_errors_stops_whatever_the_rate():
    watch = EnvErrorWatch(window=2, max_rate=1.0)
    watch.observe([traj(0, errored=True), traj(1, errored=True)])
    assert watch.stop_reason() == (
        "2 of the last 2 episodes ended in an environment error (100%), so nothing is left to "
        "train on"
    )


def test_reset_failures_count_from_the_running_total():
    watch = EnvErrorWatch(window=3, max_rate=0.5)
    watch.observe_reset_failures(2)
    watch.observe_reset_failures(2)  # the same two, seen again
    assert watch.step_count() == 2
    watch.observe([traj(0)])
    assert watch.stop_reason() is not None


def test_group_mates_are_set_aside_but_are_not_errors():
    mate = traj(1, group_id=0)
    marked = stub_trajectory(0.0, {**mate.metadata, GROUP_ENV_ERROR: True})
    assert not is_set_aside(mate)
    assert is_set_aside(marked) and not is_env_error(marked)
    assert is_set_aside(traj(0, errored=True)) and is_env_error(traj(0, errored=True))


# ------------------------------------------------------------------ taking a batch
class FakeBackend:
    """Hands out `items` in order, `per_call` at most per call; counts reset failures."""

    def __init__(self, items: list[Any], per_call: int = 10, resets: int = 0) -> None:
        self.items, self.per_call, self.resets = list(items), per_call, resets
        self.asked: list[int] = []

    def next_batch(self, n: int, timeout: float | None = None) -> list[Any]:
        self.asked.append(n)
        k = min(n, self.per_call)
        taken, self.items = self.items[:k], self.items[k:]
        return taken

    def rollout_stats(self) -> dict[str, Any]:
        return {"dropped": self.resets}


def test_the_batch_is_filled_with_the_first_good_trajectories():
    items = [traj(0), traj(1, errored=True), traj(2), traj(3, errored=True), traj(4), traj(5)]
    backend = FakeBackend(items)
    watch = EnvErrorWatch(window=100, max_rate=0.1)
    good, aside = take_batch(backend, 3, watch, "run/trajectories.jsonl")
    assert [t.metadata["index"] for t in good] == [0, 2, 4]
    assert [t.metadata["index"] for t in aside] == [1, 3]
    assert backend.asked == [3, 1, 1]  # asks only for what is still missing
    assert backend.items == [traj(5)]
    assert watch.step_count() == 2


def test_a_run_of_errors_stops_with_one_line_naming_where_they_are():
    backend = FakeBackend([traj(i, errored=i % 2 == 0) for i in range(40)], per_call=1)
    watch = EnvErrorWatch(window=8, max_rate=0.25)
    with pytest.raises(RunStopped) as stop:
        take_batch(backend, 30, watch, "run/trajectories.jsonl")
    line = str(stop.value)
    assert "\n" not in line
    assert line == (
        "4 of the last 8 episodes ended in an environment error (50%), more than "
        "train.max_env_error_rate=0.25; the errored trajectories are kept, untrained, in "
        "run/trajectories.jsonl"
    )


def test_reset_failures_alone_stop_a_run_that_gets_no_trajectory():
    backend = FakeBackend([], resets=5)
    with pytest.raises(RunStopped, match="5 of the last 5 episodes"):
        take_batch(backend, 4, EnvErrorWatch(window=5, max_rate=0.5), "x")


# ------------------------------------------------------------------ the scheduler
class StubLoop:
    """An agent loop whose episodes finish (or fail) as `outcome(index)` says, on the next step:
    "ok", "error" (the environment raised in a step) or "reset" (it raised in reset)."""

    def __init__(self, outcome: Any) -> None:
        self.outcome = outcome
        self.engine = SimpleNamespace(version=0, has_work=lambda: True)
        self.started: list[int] = []
        self._pending: list[dict[str, Any]] = []
        self.dropped: list[dict[str, Any]] = []
        self.decode_s, self.decode_steps, self.decoding_sum = 0.0, 0, 0

    @property
    def num_in_flight(self) -> int:
        return len(self._pending)

    def start(self, episode_id: str, task: Task, meta: dict[str, Any]) -> None:
        self.started.append(meta["index"])
        if self.outcome(meta["index"]) == "reset":
            self.dropped.append({**meta, "error": "RuntimeError: reset"})
        else:
            self._pending.append(meta)

    def step(self) -> list[Any]:
        done, self._pending = self._pending, []
        return [
            stub_trajectory(
                0.0,
                {**m, "end_reason": "env_error" if self.outcome(m["index"]) == "error" else "eos"},
            )
            for m in done
        ]

    def close(self) -> None:
        pass


class ListQueue:
    def __init__(self) -> None:
        self.items: list[Any] = []

    def put(self, items: list[Any]) -> None:
        self.items += items


def scheduler(loop: StubLoop, group_size: int = 1, batch_size: int = 4) -> Scheduler:
    tasks = iter(Task(f"t{i}", "p", "a") for i in range(10_000))
    weights = SimpleNamespace(latest_version=lambda: 0)
    return Scheduler(
        loop,  # type: ignore[arg-type]
        tasks,
        ListQueue(),
        weights,  # type: ignore[arg-type]
        concurrency=8,
        batch_size=batch_size,
        group_size=group_size,
        ahead=0,
    )


def test_without_errors_the_bound_is_one_batch_per_version():
    s = scheduler(StubLoop(lambda i: "ok"))
    for _ in range(5):
        s.tick()
    assert s.loop.started == [0, 1, 2, 3] and s.admission_limit() == 4


def test_each_errored_trajectory_or_failed_reset_is_replaced():
    outcomes = {1: "error", 2: "reset"}
    s = scheduler(StubLoop(lambda i: outcomes.get(i, "ok")))
    for _ in range(5):
        s.tick()
    assert s.stats.dropped == 1 and s.stats.replaced == 2
    assert s.loop.started == [0, 1, 2, 3, 4, 5]  # two replacements for the same version
    queued = s.out.items
    assert [t.metadata["index"] for t in queued if not is_set_aside(t)] == [0, 3, 4, 5]


def test_a_group_with_an_errored_member_is_set_aside_whole_and_replaced():
    outcomes = {1: "error", 4: "reset"}
    s = scheduler(StubLoop(lambda i: outcomes.get(i, "ok")), group_size=2)
    for _ in range(6):
        s.tick()
    by_group: dict[int, list[Any]] = {}
    for t in s.out.items:
        by_group.setdefault(t.metadata["group_id"], []).append(t)
    assert all(is_set_aside(t) for t in by_group[0])  # index 1 errored; 0 is its mate
    assert [is_env_error(t) for t in by_group[0]] == [False, True]
    assert [t.metadata["index"] for t in by_group[2]] == [5]  # 4's reset raised
    assert is_set_aside(by_group[2][0]) and not is_env_error(by_group[2][0])
    good = {g for g, members in by_group.items() if not any(map(is_set_aside, members))}
    assert good == {1, 3} and all(len(by_group[g]) == 2 for g in good)
    assert s.stats.replaced == 4 and s.admission_limit() == 8
