"""The serving engine's thread: one inference engine (built-in or vLLM, `sao.rollout.interface`)
stepped continuously, bridged to asyncio.

HTTP handlers submit a prompt and await the result (or iterate over it, token by token, for a
streamed reply); a single background thread owns the decode loop. The learner publishes new
weights through `publish`, which the engine applies between two decode steps: a request in flight
continues under the new weights and each of its tokens keeps the version that produced it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from torch import Tensor

from sao.rollout.interface import InferenceEngine
from sao.rollout.requests import Completion, SamplingParams


@dataclass
class _Listener:
    loop: asyncio.AbstractEventLoop
    queue: asyncio.Queue
    stream: bool
    sent: int = 0
    done: bool = field(default=False)


class EngineWorker:
    """Runs `engine.step()` on its own thread while any request is in flight."""

    def __init__(self, engine: InferenceEngine) -> None:
        self.engine = engine
        self._listeners: dict[str, _Listener] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sao-serve-engine", daemon=True)

    @property
    def version(self) -> int:
        return self.engine.version

    @property
    def in_flight(self) -> int:
        with self._lock:
            return len(self._listeners)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def publish(self, weights: Mapping[str, Tensor], version: int) -> None:
        """Swap new weights in between decode steps (called from the learner's thread)."""
        self.engine.update_weights(weights, version)

    async def generate(
        self,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        stop_ids: Sequence[int],
        stream: bool = False,
        stop_strings: Sequence[str] = (),
    ) -> AsyncIterator[list[int] | Completion]:
        """Yield lists of newly sampled token ids (when `stream`), then the finished `Completion`.

        Raises:
            ValueError: the engine refused the prompt (too long, bad ids).
            RuntimeError: the engine failed while this request was in flight.
        """
        listener = _Listener(asyncio.get_running_loop(), asyncio.Queue(), stream)
        with self._lock:
            self._listeners[request_id] = listener
        try:
            self.engine.submit(request_id, prompt_ids, params, stop_ids, stop_strings)
        except BaseException:
            with self._lock:
                self._listeners.pop(request_id, None)
            raise
        self._wake.set()
        while True:
            item = await listener.queue.get()
            if isinstance(item, BaseException):
                raise item
            yield item
            if isinstance(item, Completion):
                return

    # ------------------------------------------------------------------ the decode thread
    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.engine.has_work():
                self._wake.wait(timeout=0.1)
                self._wake.clear()
                continue
            try:
                finished = self.engine.step()
            except Exception as err:  # the engine broke: fail every waiting request, keep serving
                self._fail_all(RuntimeError(f"engine step failed: {type(err).__name__}: {err}"))
                continue
            self._deliver(finished)

    def _deliver(self, finished: list[Completion]) -> None:
        with self._lock:
            listeners = dict(self._listeners)
        if any(listener.stream for listener in listeners.values()):
            # Both engines expose the tokens sampled so far (not part of the engine interface).
            for request_id, tokens in self.engine.in_flight_tokens().items():  # type: ignore[attr-defined]
                listener = listeners.get(request_id)
                if listener is not None and listener.stream and len(tokens) > listener.sent:
                    self._send(listener, tokens[listener.sent :])
                    listener.sent = len(tokens)
        for completion in finished:
            listener = listeners.get(completion.request_id)
            if listener is None:
                continue
            if listener.stream and len(completion.token_ids) > listener.sent:
                self._send(listener, completion.token_ids[listener.sent :])
            self._send(listener, completion)
            with self._lock:
                self._listeners.pop(completion.request_id, None)

    def _fail_all(self, error: Exception) -> None:
        with self._lock:
            listeners, self._listeners = self._listeners, {}
        for listener in listeners.values():
            self._send(listener, error)

    @staticmethod
    def _send(listener: _Listener, item: object) -> None:
        listener.loop.call_soon_threadsafe(listener.queue.put_nowait, item)
