"""One call of a function under torch's profiler, summed up as a table of its costliest ops.

Used by the GPU check's learner stage and the engine benchmark (`--profile N`) to say where a
step's time goes: on a GPU, ranked by the ops' own device time, which shows whether a step is
bound by arithmetic or by launching many small kernels; elsewhere by their own CPU time.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.profiler import ProfilerActivity, profile


def profile_table(run: Callable[[], object], device: torch.device, top: int) -> str:
    """Run `run()` once under the profiler; the `top` ops by their own time on `device`.

    Args:
        run: the work to profile (a learner step, an engine's batch of requests).
        device: where the work runs; CUDA adds the device's kernels and ranks by their time.
        top: how many rows the table keeps (at least 1).

    Raises:
        ValueError: one line, for `top` below 1.
    """
    if top < 1:
        raise ValueError(f"profile: top must be at least 1, got {top}")
    on_cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_cuda else [])
    with profile(activities=activities) as prof:
        run()
        if on_cuda:
            torch.cuda.synchronize(device)
    sort = "self_cuda_time_total" if on_cuda else "self_cpu_time_total"
    return prof.key_averages().table(sort_by=sort, row_limit=top)
