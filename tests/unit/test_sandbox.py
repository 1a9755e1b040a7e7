"""The Python sandbox: normal runs, every hostile behaviour, fallbacks, limits and concurrency.

Hostile tests run each behaviour for real and check that the caller survives, gets a result
that says what happened, and that nothing the code started is alive afterwards. Fallback layers
are exercised by skipping the layer they replace.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sao.tools.sandbox import (
    SandboxResult,
    run_python,
    sandbox_capabilities,
    sandbox_uids,
    set_max_concurrency,
)
from sao.tools.sandbox import run as sandbox_run
from sao.tools.sandbox.cleanup import live_processes_of
from sao.tools.sandbox.limits import ALL_LAYERS, SandboxLimits
from sao.tools.sandbox.outcome import RunEnd, describe_error, reported_exit_code
from sao.tools.sandbox.pipes import Captured, read_bounded

FORK_BOMB = """
import os
while True:
    try:
        os.fork()
    except OSError:
        pass
"""


def test_normal_code_prints_and_exits_zero():
    result = run_python("import math\nprint('hello', math.factorial(5))\n")
    assert result == SandboxResult("hello 120\n", "", 0, False, None)


def test_syntax_error_gives_traceback_and_nonzero_exit():
    result = run_python("def broken(:\n    pass\n")
    assert result.exit_code == 1
    assert "SyntaxError" in result.stderr and "main.py" in result.stderr
    assert result.error is None and not result.timed_out


def test_exit_status_and_exception_are_reported_as_is():
    assert run_python("import sys\nsys.exit(3)").exit_code == 3
    result = run_python("print('before')\n1 / 0\n")
    assert result.stdout == "before\n"
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert (result.exit_code, result.error) == (1, None)


def test_endless_loop_times_out():
    result = run_python("while True:\n    pass\n", timeout_s=1.0)
    assert result.timed_out and result.exit_code is None
    assert result.error.startswith("timed out after 1 s")


def test_cpu_time_limit_kills_with_sigxcpu():
    result = run_python("while True:\n    pass\n", timeout_s=20.0, cpu_time_s=1.0)
    assert not result.timed_out
    assert result.exit_code == -signal.SIGXCPU
    assert result.error == "CPU time limit of 1 s exceeded (SIGXCPU)"


def test_memory_bomb_hits_the_memory_limit():
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(10_000_000))\n"
    result = run_python(code, memory_mb=128)
    assert result.exit_code == 1 and "MemoryError" in result.stderr
    assert result.error == "memory limit of 128 MB exceeded"


def test_huge_output_is_truncated_and_bounded():
    result = run_python("while True:\n    print('x' * 9999)\n", max_output_bytes=50_000)
    assert result.stdout == ("x" * 9999 + "\n") * 5
    assert result.exit_code is None and not result.timed_out
    assert result.error == "output truncated at 50000 bytes per stream; process killed"


def test_huge_stderr_is_truncated_too():
    result = run_python(
        "import sys\nwhile True:\n    sys.stderr.write('e' * 4096)\n", 5.0, 256, 8192
    )
    assert result.stderr == "e" * 8192
    assert "truncated" in result.error


def test_file_size_limit():
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'0' * 200_000)\n"
    result = run_python(code, max_file_bytes=100_000)
    assert "File too large" in result.stderr
    assert result.error == "file size limit of 100000 bytes exceeded"


def test_working_directory_is_fresh_and_removed():
    first = run_python("import os\nopen('left.txt', 'w').write('x')\nprint(os.getcwd())")
    work_dir = first.stdout.strip()
    assert first.exit_code == 0 and os.path.basename(work_dir) == "work"
    assert not os.path.exists(os.path.dirname(work_dir))
    second = run_python("import os\nprint(sorted(os.listdir('.')))")
    assert second.stdout == "[]\n"


WRITE_OUTSIDE = """
import os
for name, attempt in [
    ("write", lambda: open({victim!r}, "w").write("changed")),
    ("delete", lambda: os.remove({victim!r})),
    ("create", lambda: open({new!r}, "w").write("new")),
]:
    try:
        attempt()
        print(name, "succeeded")
    except OSError as exc:
        print(name, "refused", exc.errno)
"""


def _attempt_writes(directory, skip=(), world_writable=False):
    victim = directory / "victim.txt"
    victim.write_text("original")
    if world_writable:
        directory.chmod(0o777)
        victim.chmod(0o666)
    new = directory / "new.txt"
    code = WRITE_OUTSIDE.format(victim=str(victim), new=str(new))
    return run_python(code, skip_layers=skip), victim, new


@pytest.mark.parametrize(
    "skip", [(), ("read_only_root",), ("separate_uid",), ("pid_namespace", "network_namespace")]
)
def test_writing_outside_the_work_dir_leaves_caller_files_untouched(tmp_path, skip):
    result, victim, new = _attempt_writes(tmp_path, skip)
    assert victim.read_text() == "original"
    assert not new.exists()
    if result.error is None:
        assert result.stdout.count("refused") == 3, result
    else:
        # Without a filesystem layer the sandbox must refuse to run, never run unprotected.
        assert result.error.startswith("sandbox failure: refusing to run"), result


def test_world_writable_files_are_protected_only_by_the_read_only_root(tmp_path):
    result, victim, new = _attempt_writes(tmp_path, world_writable=True)
    # A separate uid alone obeys file modes, and these modes let anyone write.
    protected = sandbox_capabilities()["read_only_root"]
    assert (victim.read_text() == "original") == protected
    assert new.exists() != protected
    assert ("succeeded" in result.stdout) != protected


def test_without_separate_uid_root_refuses_to_run():
    result = run_python("print('ran')", skip_layers=["separate_uid"])
    assert (result.stdout, result.exit_code) == ("", None)
    assert result.error.startswith("sandbox failure: refusing to run: without separate_uid")
    assert "fork bomb" in result.error


CONNECT = """
import socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
    print("connected")
except OSError as exc:
    print("blocked", type(exc).__name__)
"""


@pytest.mark.parametrize("skip", [(), ("network_namespace",)])
def test_sockets_cannot_reach_a_listening_server(skip):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.setblocking(False)
        result = run_python(CONNECT.format(port=server.getsockname()[1]), skip_layers=skip)
        assert result.stdout.startswith("blocked"), result
        with pytest.raises(BlockingIOError):
            server.accept()


KILL_PARENT = """
import os, signal
for name, attempt in [
    ("parent", lambda: os.kill(os.getppid(), signal.SIGKILL)),
    ("victim", lambda: os.kill({victim}, signal.SIGKILL)),
    ("caller", lambda: os.kill({caller}, 0)),
    ("parent_group", lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGKILL)),
]:
    try:
        attempt()
        print(name, "sent", flush=True)
    except OSError as exc:
        print(name, "refused", type(exc).__name__, flush=True)
"""


@pytest.mark.parametrize("skip", [(), ("pid_namespace",)])
def test_killing_the_parent_does_not_hurt_the_caller(skip):
    victim = subprocess.Popen(["sleep", "60"])
    try:
        code = KILL_PARENT.format(victim=victim.pid, caller=os.getpid())
        result = run_python(code, skip_layers=skip)
        assert victim.poll() is None, "a process of the caller's uid was killed"
        lines = result.stdout.splitlines()
        assert lines[0].startswith("parent refused")
        assert lines[1].startswith("victim refused")
        assert lines[2].startswith("caller refused")
        # The group signal reaches only the sandbox itself, which it kills.
        assert result.exit_code == -signal.SIGKILL
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("skip", [(), ("pid_namespace",)])
def test_fork_bomb_is_contained_and_fully_cleaned_up(skip):
    result = run_python(FORK_BOMB, timeout_s=1.5, max_processes=32, skip_layers=skip)
    assert result.timed_out and "timed out" in result.error
    assert live_processes_of(sandbox_uids()) == []
    assert run_python("print('still fine')").stdout == "still fine\n"


def test_process_limit_caps_the_number_of_children():
    code = """
import os, time
children = 0
while True:
    try:
        pid = os.fork()
    except OSError as exc:
        print(children, exc.errno)
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children += 1
"""
    result = run_python(code, max_processes=16, timeout_s=10.0)
    # The code process itself is the 16th; sleeping children die with the sandbox.
    assert result.stdout == "15 11\n" and result.exit_code == 0
    assert live_processes_of(sandbox_uids()) == []


def test_caller_exception_still_kills_the_child(monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(sandbox_run, "read_bounded", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_python("import time\ntime.sleep(60)\n")
    assert live_processes_of(sandbox_uids()) == []


@pytest.fixture
def two_slots():
    previous = sandbox_run.max_concurrency()
    set_max_concurrency(2)
    yield
    set_max_concurrency(previous)


def test_sixteen_concurrent_calls_all_succeed_within_the_limit(monkeypatch, two_slots):
    in_flight, peak, lock = [0], [0], threading.Lock()
    real_run_in = sandbox_run._run_in

    def counting_run_in(*args):
        with lock:
            in_flight[0] += 1
            peak[0] = max(peak[0], in_flight[0])
        try:
            return real_run_in(*args)
        finally:
            with lock:
                in_flight[0] -= 1

    monkeypatch.setattr(sandbox_run, "_run_in", counting_run_in)
    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(lambda i: run_python(f"print({i} * {i})"), range(16)))
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(16)]
    assert all(r.exit_code == 0 for r in results)
    assert peak[0] == 2


def test_capabilities_name_every_layer():
    capabilities = sandbox_capabilities()
    assert set(capabilities) == set(ALL_LAYERS)
    assert capabilities["process_group"] and capabilities["resource_limits"]
    assert capabilities["socket_audit_hook"] == (not capabilities["network_namespace"])


def test_missing_layer_warns_once_naming_layer_and_fallback(monkeypatch, caplog):
    monkeypatch.setattr(sandbox_run, "_warned_layers", set())
    layers = {"pid_namespace": True, "network_namespace": False}
    reasons = {"network_namespace": "unshare network_namespace: Operation not permitted"}
    with caplog.at_level(logging.WARNING, logger="sao.tools.sandbox"):
        for _ in range(3):
            sandbox_run._warn_missing_layers(layers, reasons, frozenset({"read_only_root"}))
    messages = [record.getMessage() for record in caplog.records]
    assert sorted(m.split("'")[1] for m in messages) == ["network_namespace", "separate_uid"]
    network = next(m for m in messages if "network_namespace" in m)
    assert "Operation not permitted" in network and "audit hook" in network


@pytest.mark.parametrize(
    ("kwargs", "error", "field"),
    [
        ({"code": b"print(1)"}, TypeError, "code"),
        ({"code": "", "timeout_s": 0}, ValueError, "timeout_s"),
        ({"code": "", "timeout_s": float("nan")}, ValueError, "timeout_s"),
        ({"code": "", "memory_mb": 16}, ValueError, "memory_mb"),
        ({"code": "", "max_output_bytes": 2.5}, TypeError, "max_output_bytes"),
        ({"code": "", "skip_layers": "pid_namespace"}, TypeError, "skip_layers"),
        ({"code": "", "skip_layers": ["firewall"]}, ValueError, "firewall"),
    ],
)
def test_bad_arguments_raise_naming_the_field(kwargs, error, field):
    with pytest.raises(error, match=field):
        run_python(**kwargs)


def test_bad_concurrency_limit_is_rejected():
    with pytest.raises(ValueError, match="limit"):
        set_max_concurrency(0)


def _end(**changes) -> RunEnd:
    base = dict(
        exit_code=0,
        signal_number=None,
        timed_out=False,
        truncated=False,
        setup_error=None,
        stderr_tail="",
    )
    return RunEnd(**{**base, **changes})


@pytest.mark.parametrize(
    ("end", "exit_code", "error"),
    [
        (_end(), 0, None),
        (_end(exit_code=2, stderr_tail="ValueError: x"), 2, None),
        (_end(exit_code=None, timed_out=True), None, "timed out after 2.5 s (wall clock); process killed"),
        (_end(exit_code=None, truncated=True), None, "output truncated at 100 bytes per stream; process killed"),
        (_end(exit_code=None, signal_number=24), -24, "CPU time limit of 3 s exceeded (SIGXCPU)"),
        (_end(exit_code=None, signal_number=9), -9, "killed by signal 9 (SIGKILL)"),
        (_end(exit_code=None, signal_number=6, stderr_tail="Cannot allocate memory"), -6, "memory limit of 64 MB exceeded"),
        (_end(exit_code=1, stderr_tail="OSError: [Errno 27] File too large"), 1, "file size limit of 1000 bytes exceeded"),
        (_end(exit_code=None, setup_error="mount /: denied"), None, "sandbox failure: mount /: denied"),
        (_end(exit_code=None), None, "sandbox failure: the launcher ended without reporting an exit status"),
    ],
)  # fmt: skip
def test_outcome_rules(end, exit_code, error):
    limits = SandboxLimits(
        timeout_s=2.5, cpu_time_s=2.2, memory_mb=64, max_output_bytes=100, max_file_bytes=1000
    )
    assert reported_exit_code(end) == exit_code
    assert describe_error(end, limits) == error


def test_read_bounded_keeps_at_most_the_cap_and_reports_overflow():
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    os.write(out_write, b"a" * 300)
    os.write(err_write, b"warn")
    os.close(err_write)
    captured = read_bounded(out_read, err_read, deadline=time.monotonic() + 60, cap=100)
    assert captured == Captured(b"a" * 100, b"warn", "overflow")
    for fd in (out_read, out_write, err_read):
        os.close(fd)


def test_read_bounded_stops_at_end_of_file_or_at_the_deadline():
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    os.write(out_write, b"done")
    os.close(out_write)
    os.close(err_write)
    captured = read_bounded(out_read, err_read, time.monotonic() + 60, cap=100)
    assert captured == Captured(b"done", b"", "eof")
    first_read, first_write = os.pipe()
    second_read, second_write = os.pipe()
    # Writers that stay open never send end-of-file; only the (past) deadline ends reading.
    assert read_bounded(first_read, second_read, 0.0, cap=100).stop == "deadline"
    for fd in (out_read, err_read, first_read, first_write, second_read, second_write):
        os.close(fd)
