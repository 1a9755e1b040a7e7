"""Child-side launcher: build the isolation layers, then exec the interpreter on the code.

Run as `python -I -S launcher.py CONFIG_JSON` by `run.py`, in a new session. It must
stay standalone (standard library only, no `sao` imports): `-I -S` leaves the package off the path.

Process tree (a PID namespace makes `init` its PID 1):

    launcher (caller's uid)  --fork-->  init (PID 1)  --fork-->  code (sandbox uid, rlimits, exec)

The launcher unshares the namespaces, because a new PID namespace only applies to children.
`init` sets up mounts, forks the code process, waits for it and reports its exit status on the
status pipe as JSON lines. When `init` exits the kernel kills everything left in the namespace,
which is what contains a fork bomb's survivors.
"""

from __future__ import annotations

import ctypes
import json
import os
import re
import resource
import signal
import stat
import sys

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PRESERVED_MOUNT_OPTIONS = {
    "nosuid": MS_NOSUID,
    "nodev": MS_NODEV,
    "noexec": MS_NOEXEC,
    "noatime": MS_NOATIME,
    "nodiratime": MS_NODIRATIME,
    "relatime": MS_RELATIME,
}
SANDBOX_NICENESS = 10
MAX_OPEN_FILES = 256

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _encode(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


def _mount(
    source: str | None, target: str, fstype: str | None, flags: int, data: str | None
) -> None:
    result = _libc.mount(_encode(source), _encode(target), _encode(fstype), flags, _encode(data))
    _check(result, f"mount {target}")


def _prctl(option: int, value: int) -> None:
    _check(_libc.prctl(option, value, 0, 0, 0), f"prctl {option}")


def _report(status_fd: int, record: dict) -> None:
    # One short write stays below PIPE_BUF, so records from two processes never interleave.
    os.write(status_fd, (json.dumps(record) + "\n").encode())


def _unshare_layers(skip: set[str]) -> tuple[dict[str, bool], dict[str, str]]:
    layers: dict[str, bool] = {}
    reasons: dict[str, str] = {}
    for name, flag in (
        ("pid_namespace", CLONE_NEWPID),
        ("network_namespace", CLONE_NEWNET),
        ("read_only_root", CLONE_NEWNS),
    ):
        if name in skip:
            layers[name] = False
            continue
        try:
            _check(_libc.unshare(flag), f"unshare {name}")
            layers[name] = True
        except OSError as exc:
            layers[name] = False
            reasons[name] = str(exc)
    return layers, reasons


def _unescape_mount_path(field: str) -> str:
    """mountinfo writes blanks, tabs and backslashes in paths as octal escapes (\\040)."""
    raw = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m.group(1), 8)]), field.encode())
    return raw.decode(errors="surrogateescape")


def _mount_points() -> list[tuple[str, int]]:
    """Mount points of this namespace, parents first, with the option flags to keep."""
    points = []
    with open("/proc/self/mountinfo") as handle:
        for line in handle:
            fields = line.split()
            path = _unescape_mount_path(fields[4])
            flags = 0
            for option in fields[5].split(","):
                flags |= PRESERVED_MOUNT_OPTIONS.get(option, 0)
            points.append((path, flags))
    return points


def _blocked_ancestor(path: str) -> str | None:
    """The top-most directory above `path` that other users may not traverse, if any."""
    current = "/"
    for part in path.strip("/").split("/")[:-1]:
        current = os.path.join(current, part)
        if not os.stat(current).st_mode & stat.S_IXOTH:
            return current
    return None


def _expose_paths(paths: list[str]) -> None:
    """Make `paths` reachable by the sandbox uid without changing any host permission.

    A private directory on the way (e.g. /root holding a pyenv interpreter) is covered by an
    empty tmpfs that others may traverse, and each needed path is bind-mounted back into it.
    That also hides the rest of the private directory from the code.
    """
    blocked: dict[str, list[tuple[str, int]]] = {}
    for path in paths:
        ancestor = _blocked_ancestor(path)
        if ancestor is not None:
            fd = os.open(path, os.O_PATH)
            blocked.setdefault(ancestor, []).append((path, fd))
    for ancestor, entries in blocked.items():
        _mount("tmpfs", ancestor, "tmpfs", MS_NOSUID | MS_NODEV, "size=64k,mode=0755")
        for path, fd in entries:
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(path, mode=0o755, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
                open(path, "a").close()
            _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND | MS_REC, None)
            os.close(fd)


def _build_read_only_root(config: dict, pid_namespace: bool, uid: int | None) -> None:
    _mount(None, "/", None, MS_REC | MS_PRIVATE, None)
    if pid_namespace:
        _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, None)
    owner = 0 if uid is None else uid
    tmpfs_options = f"size={config['limits']['disk_mb']}m,mode=0700,uid={owner},gid={owner}"
    _mount("tmpfs", config["work_dir"], "tmpfs", MS_NOSUID | MS_NODEV, tmpfs_options)
    if uid is not None:
        _expose_paths(config["reachable_paths"])
    for path, flags in _mount_points():
        if path == config["work_dir"]:
            continue
        try:
            _mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags, None)
        except OSError:
            # Shadowed or vanished mount points cannot be reached by the code either;
            # only the root itself must succeed.
            if path == "/":
                raise


def _paths_reachable(paths: list[str]) -> bool:
    return all(_blocked_ancestor(path) is None for path in paths)


def _apply_limits(limits: dict, uid: int | None) -> None:
    memory = limits["memory_mb"] * 1024 * 1024
    processes = limits["max_processes"]
    for which, value in (
        (resource.RLIMIT_CPU, tuple(limits["cpu_seconds_soft_hard"])),
        (resource.RLIMIT_AS, (memory, memory)),
        (resource.RLIMIT_FSIZE, (limits["max_file_bytes"], limits["max_file_bytes"])),
        (resource.RLIMIT_NPROC, (processes, processes)),
        (resource.RLIMIT_CORE, (0, 0)),
        (resource.RLIMIT_NOFILE, (MAX_OPEN_FILES, MAX_OPEN_FILES)),
    ):
        resource.setrlimit(which, value)


def _drop_capability_bounding_set() -> None:
    """Make the exec'd interpreter capability-free even if it still runs as uid 0.

    Root regains full capabilities at exec, but only those left in the bounding set; with the
    set empty, root code in the namespaces cannot remount / writable or signal other uids.
    """
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for capability in range(last + 1):
        _prctl(PR_CAPBSET_DROP, capability)


def _exec_code(config: dict, uid: int | None, guard_network: bool) -> None:
    """Runs in the code process; never returns."""
    work_dir = config["work_dir"]
    os.chdir(work_dir)
    os.nice(SANDBOX_NICENESS)
    _apply_limits(config["limits"], uid)
    if os.getuid() == 0:
        _drop_capability_bounding_set()
    if uid is not None:
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    # Set after the uid change, which clears the parent-death signal.
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": work_dir,
        "TMPDIR": work_dir,
        "LANG": "C.UTF-8",
    }
    argv = [config["python"], "-I", "-X", "utf8", "-B"]
    if guard_network:
        argv.append(config["guard_path"])
    argv.append(config["code_path"])
    os.execve(config["python"], argv, env)


def _kill_all_of_uid(uid: int) -> None:
    """Kill every process of `uid`: kill(-1) as that uid reaches exactly its own processes."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgid(uid)
            os.setuid(uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


def _reap_children() -> None:
    try:
        while True:
            os.waitpid(-1, 0)
    except ChildProcessError:
        pass


def _unprotected(layers: dict[str, bool]) -> str | None:
    """Why the code may not run with these layers, or None; fails closed rather than open."""
    if layers["separate_uid"]:
        return None
    missing = []
    if not layers["read_only_root"]:
        missing.append("nothing protects the caller's files")
    if not layers["pid_namespace"]:
        missing.append("nothing stops signals to the caller")
    if os.getuid() == 0:
        missing.append("RLIMIT_NPROC does not bind uid 0, so nothing contains a fork bomb")
    return "without separate_uid, " + "; ".join(missing) if missing else None


def _run_init(config: dict, layers: dict[str, bool], reasons: dict[str, str]) -> None:
    """PID 1 of the namespace: finish the layers, run the code, report how it ended."""
    status_fd = config["status_fd"]
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Without a PID namespace, orphans of the code come back here to be reaped, not to host init.
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    uid = config["uid"]
    if uid is not None and os.getuid() != 0:
        uid, reasons["separate_uid"] = None, "the launcher is not root"
    if layers["read_only_root"]:
        try:
            _build_read_only_root(config, layers["pid_namespace"], uid)
        except OSError as exc:
            layers["read_only_root"], reasons["read_only_root"] = False, str(exc)
    if uid is not None and not layers["read_only_root"]:
        if not _paths_reachable(config["reachable_paths"]):
            uid, reasons["separate_uid"] = None, "the interpreter is in a private directory"
        else:
            os.chown(config["work_dir"], uid, uid)
    layers["separate_uid"] = uid is not None
    layers["socket_audit_hook"] = not layers["network_namespace"]
    _report(status_fd, {"layers": layers, "reasons": reasons})
    missing = _unprotected(layers)
    if missing:
        _report(status_fd, {"setup_error": f"refusing to run: {missing}"})
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.set_inheritable(status_fd, False)
            _exec_code(config, uid, guard_network=layers["socket_audit_hook"])
        except BaseException as exc:  # anything here is a sandbox failure
            _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
        os._exit(127)
    _, status = os.waitpid(pid, 0)
    if not layers["pid_namespace"] and uid is not None:
        _kill_all_of_uid(uid)
        _reap_children()
    if os.WIFSIGNALED(status):
        _report(status_fd, {"signal": os.WTERMSIG(status)})
    else:
        _report(status_fd, {"exit_code": os.WEXITSTATUS(status)})


def main() -> None:
    """Entry point: read the configuration, unshare, fork `init`, wait for it."""
    config = json.loads(sys.argv[1])
    status_fd = config["status_fd"]
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != config["caller_pid"]:
        os._exit(1)
    layers, reasons = _unshare_layers(set(config["skip"]))
    try:
        pid = os.fork()
    except OSError as exc:
        _report(status_fd, {"setup_error": f"fork failed: {exc}"})
        os._exit(1)
    if pid == 0:
        try:
            _run_init(config, layers, reasons)
        except BaseException as exc:  # report, never leave the caller guessing
            _report(status_fd, {"setup_error": f"{type(exc).__name__}: {exc}"})
            os._exit(1)
        os._exit(0)
    os.waitpid(pid, 0)


if __name__ == "__main__":
    main()
