"""The shared plumbing under every floor: files written whole (`durable`), a run's own stop
(`stopped`), fault-injection points (`faults`) and the profiler's table (`profiling`)."""
