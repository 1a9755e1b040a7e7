"""The Ray backend's driver-side drain: trajectories leave the queue actor only to be logged by
the driver (so workers need no shared disk), in completion order, and what the stopped rollout
side left behind is logged too. A list stands in for the queue actor."""

from __future__ import annotations

import threading
import time

from stub_trajectories import stub_trajectory

from sao.runtime.ray_backend import Empty, _Drain
from sao.runtime.run_dir import TrajectoryLog, read_trajectories
from sao.runtime.transport import LocalTrajectoryQueue


class ListQueue:
    """The three methods of `ray.util.queue.Queue` the drain uses, over a list."""

    def __init__(self) -> None:
        self.items: list[dict] = []
        self.lock = threading.Lock()

    def put(self, *trajectories) -> None:
        with self.lock:
            self.items += [t.to_dict() for t in trajectories]

    def get(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.items:
                    return self.items.pop(0)
            time.sleep(0.01)
        raise Empty

    def qsize(self) -> int:
        with self.lock:
            return len(self.items)

    def get_nowait_batch(self, n: int) -> list[dict]:
        with self.lock:
            taken, self.items = self.items[:n], self.items[n:]
            return taken


def indices(trajectories) -> list[int]:
    return [t.metadata["index"] for t in trajectories]


def test_the_driver_logs_each_trajectory_before_the_learner_can_take_it(tmp_path) -> None:
    source, sink = ListQueue(), LocalTrajectoryQueue()
    drain = _Drain(source, TrajectoryLog(tmp_path), sink)
    drain.start()
    source.put(*(stub_trajectory(1.0, {"index": i}) for i in range(3)))
    taken = sink.get_batch(3, timeout=10)
    assert indices(taken) == [0, 1, 2]
    assert indices(read_trajectories(tmp_path)) == [0, 1, 2]

    # Completed after the thread stopped: stop() still logs it and hands it over.
    drain._stop.set()
    drain._thread.join()
    source.put(stub_trajectory(0.0, {"index": 3}))
    drain.stop()
    assert drain.error is None
    assert indices(read_trajectories(tmp_path)) == [0, 1, 2, 3]
    assert indices(sink.get_batch(1, timeout=1)) == [3]


def test_a_failing_queue_is_reported_not_swallowed(tmp_path) -> None:
    class Broken(ListQueue):
        def get(self, timeout: float) -> dict:
            raise ConnectionError("queue actor died")

    drain = _Drain(Broken(), TrajectoryLog(tmp_path), LocalTrajectoryQueue())
    drain.start()
    drain._thread.join(timeout=10)
    assert isinstance(drain.error, ConnectionError)
    drain.stop()
    assert read_trajectories(tmp_path) == []
