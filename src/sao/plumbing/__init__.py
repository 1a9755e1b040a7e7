"""The shared plumbing under every floor: files written whole (`durable`), a run's own stop
(`stopped`), fault-injection points (`faults`), the profiler's table (`profiling`) and a
process's peak memory by phase (`memory`)."""
