"""A learner spread over several processes (`train.learner_ranks`), its models sharded by FSDP2.

The driver is not a rank. It starts `learner_ranks` processes; each joins one process group (gloo
on CPU, NCCL on CUDA, rank r on `cuda:r`) and builds the same `Learner`, whose models
`sao.learner.sharding` then shards across the ranks. Each call the run loop makes (`step`,
`policy_state_dict`, `state_dict`, `load_state_dict`) is a collective, so it goes to every rank
and rank 0's answer comes back. Every rank receives the whole batch and trains its token-balanced
part of each update, normalising every loss over the whole batch (`sao.learner.data_parallel`):
the ranks split the work and the models' memory (weights, gradients, Adam moments), and a step is
the one-process step. Its metrics are the whole batch's, the same on every rank.

The driver keeps a whole copy of the policy for held-out evals and the final save, refreshed from
the ranks only when the version has moved (as `RemoteLearner` does under Ray). A rank that fails
stops the run with its error; when the driver dies the ranks' pipes close and they exit.
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing as mp
import os
import socket
from multiprocessing.connection import Connection, wait
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from sao.config import SAOConfig
from sao.learner.step import Learner
from sao.trajectory import Trajectory

START_TIMEOUT_S = 600.0
"""How long the ranks may take to join their group and build the learner."""


def build_learner(
    policy: nn.Module, config: SAOConfig, critic: nn.Module | None, pad_token_id: int
) -> Learner | LearnerRanks:
    """A `Learner` in this process, or `LearnerRanks` when `train.learner_ranks` > 1."""
    if config.train.learner_ranks == 1:
        return Learner(policy, config, critic, pad_token_id=pad_token_id)
    return LearnerRanks(policy, config, critic, pad_token_id)


def close_learner(learner: Any) -> None:
    """Stop the rank processes of a `LearnerRanks`; other learners need no closing."""
    if isinstance(learner, LearnerRanks):
        learner.close()


class LearnerRanks:
    """The driver's handle on the rank processes, with the methods `train()` uses of a `Learner`.

    Raises (from the constructor and every call):
        RuntimeError: naming the rank and its error when a rank fails or dies.
    """

    def __init__(
        self, policy: nn.Module, config: SAOConfig, critic: nn.Module | None, pad_token_id: int
    ) -> None:
        self._policy = policy
        self._version = 0
        self._policy_version = 0
        ranks = config.train.learner_ranks
        recipe = _dumps((policy, config, critic, pad_token_id))
        context = mp.get_context("spawn")
        port = _free_port()
        threads = max(1, torch.get_num_threads() // ranks)
        self._pipes: list[Connection] = []
        self._processes: list[Any] = []
        for rank in range(ranks):
            mine, theirs = context.Pipe()
            process = context.Process(
                target=_rank_main,
                args=(rank, ranks, port, threads, theirs),
                name=f"sao-learner-rank{rank}",
                daemon=True,
            )
            process.start()
            theirs.close()
            mine.send_bytes(recipe)
            self._pipes.append(mine)
            self._processes.append(process)
        try:
            self._gather("start", timeout=START_TIMEOUT_S)
        except BaseException:
            self.close()
            raise

    @property
    def version(self) -> int:
        return self._version

    @property
    def policy(self) -> nn.Module:
        """The driver's whole copy of the policy, at the ranks' current weights."""
        if self._policy_version != self._version:
            self._policy.load_state_dict(self.policy_state_dict())
            self._policy_version = self._version
        return self._policy

    def step(self, trajectories: list[Trajectory]) -> dict[str, float]:
        metrics = self._call("step", list(trajectories))
        self._version += 1
        return metrics

    def policy_state_dict(self) -> dict[str, torch.Tensor]:
        return self._call("policy_state_dict")

    def state_dict(self, snapshot: bool = True) -> dict[str, Any]:
        return self._call("state_dict", snapshot)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._call("load_state_dict", state)
        self._version = int(state["version"])

    def close(self) -> None:
        """Ask every rank to stop, then make sure it has."""
        for pipe in self._pipes:
            with contextlib.suppress(BrokenPipeError, OSError):  # a rank that already left
                pipe.send_bytes(_dumps(("close", ())))
        for process in self._processes:
            process.join(timeout=30)
            if process.is_alive():
                process.terminate()
                process.join(timeout=5)
        for pipe in self._pipes:
            pipe.close()
        self._pipes, self._processes = [], []

    def _call(self, command: str, *args: Any) -> Any:
        if not self._pipes:
            raise RuntimeError(f"learner ranks: {command} after close")
        message = _dumps((command, args))
        for pipe in self._pipes:
            pipe.send_bytes(message)
        return self._gather(command, timeout=None)

    def _gather(self, command: str, timeout: float | None) -> Any:
        """Every rank's reply to `command`; rank 0's result. A failure or death closes all."""
        replies: dict[int, Any] = {}
        pending = dict(enumerate(self._pipes))
        while pending:
            ready = wait(list(pending.values()), timeout=timeout)
            if not ready:
                self.close()
                raise RuntimeError(f"learner ranks: no reply to {command} in {timeout:.0f} s")
            for rank, pipe in list(pending.items()):
                if pipe not in ready:
                    continue
                try:
                    status, value = _loads(pipe.recv_bytes())
                except (EOFError, OSError):
                    code = self._processes[rank].exitcode
                    self.close()
                    raise RuntimeError(
                        f"learner rank {rank} died during {command} (exit code {code})"
                    ) from None
                if status == "error":
                    self.close()
                    raise RuntimeError(f"learner rank {rank}: {command} failed: {value}")
                replies[rank] = value
                del pending[rank]
        return replies[0]


def _rank_main(rank: int, ranks: int, port: int, threads: int, pipe: Connection) -> None:
    """One rank: join the group, build the learner, then answer commands until told to stop."""
    policy, config, critic, pad_token_id = _loads(pipe.recv_bytes())
    device = torch.device(config.train.learner_device)
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(port),
        RANK=str(rank),
        LOCAL_RANK=str(rank),
        WORLD_SIZE=str(ranks),
    )
    torch.set_num_threads(threads)
    if device.type == "cuda":
        torch.cuda.set_device(rank)
    try:
        dist.init_process_group(
            "nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=ranks
        )
        learner = Learner(policy, config, critic, pad_token_id=pad_token_id)
    except Exception as err:  # reported to the driver, which stops the run
        _reply(pipe, "error", f"{type(err).__name__}: {err}")
        return
    try:
        if _reply(pipe, "ok", None):
            _serve(learner, rank, pipe)
    finally:
        dist.destroy_process_group()


def _serve(learner: Learner, rank: int, pipe: Connection) -> None:
    while True:
        try:
            command, args = _loads(pipe.recv_bytes())
        except (EOFError, OSError):  # the driver is gone
            return
        if command == "close":
            return
        try:
            result = getattr(learner, command)(*args)
        except Exception as err:  # a failed collective leaves the group unusable: stop
            _reply(pipe, "error", f"{type(err).__name__}: {err}")
            return
        if not _reply(pipe, "ok", result if rank == 0 else None):
            return


def _reply(pipe: Connection, status: str, value: Any) -> bool:
    """Send a reply to the driver; False when the driver is gone."""
    try:
        pipe.send_bytes(_dumps((status, value)))
    except (BrokenPipeError, OSError):
        return False
    return True


def _dumps(obj: Any) -> bytes:
    """`obj` as bytes that share no memory with this process (unlike pickling tensors between
    torch processes, which maps their storage)."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def _loads(data: bytes) -> Any:
    return torch.load(io.BytesIO(data), weights_only=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
