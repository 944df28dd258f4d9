"""The probe's process: a fresh `python -I probe.py REQUEST`, or a standby started ahead (probe_standby.py).

A fresh probe spends most of its time starting: of the digits model's 7.2 s probe (2 busy cores), the
interpreter and its imports (TensorFlow, TF Serving's protos) took ~5 s and TensorFlow's teardown 1.4 s.
`start_standby()` starts `python -I probe_standby.py`, which makes those imports at once and waits for one
request, and names it in this process's environment (STANDBY_ENV) for the processes forked from it later.
`shardflow run`'s warm step worker calls it when the Trainer runs (the step table's `standby`), so the import
overlaps training, and infra-validate's step, a later fork of that worker, hands the standby its request.
`run_probe` uses the standby when it has one that takes the request, else starts a fresh probe: either way
the same script runs in a separate, isolated (`-I`), TensorFlow-only interpreter, and `timeout` counts from
the hand-over (the rest of a standby's import included, as a fresh probe's whole import is).

    start_standby()                                   # in the warm worker, before forking the steps
    done = run_probe("/tmp/scratch/request.json", 600)  # ProbeExit(returncode, stderr, standby)
"""
from __future__ import annotations

import os
import select
import signal
import stat
import subprocess
import sys
import time
from dataclasses import dataclass

from ..core.process_defaults import tensorflow_only_environment

_HERE = os.path.dirname(os.path.abspath(__file__))
PROBE, STANDBY = os.path.join(_HERE, "probe.py"), os.path.join(_HERE, "probe_standby.py")
# "OWNER PID REQUEST_FD STATUS_FD": a standby OWNER started, for OWNER and its forks (whose parent it is). A
# process exec'd from them inherits the variable but not the pipes (os.pipe's are not inheritable): it ignores it.
STANDBY_ENV = "SHARDFLOW_PROBE_STANDBY"
_started: list[tuple[subprocess.Popen, int, int]] = []  # this process's standbys: (process, request fd, status fd)


@dataclass(frozen=True)
class ProbeExit:
    """How the probe process ended: `returncode` (-N: killed by signal N; None: timed out, and killed),
    its output (`stderr`), and whether it was a `standby` started ahead."""

    returncode: int | None
    stderr: str
    standby: bool = False


def start_standby() -> None:
    """Starts a standby probe, unless the one os.environ names is this process's and still waits; names it there."""
    waiting = _started and _started[-1][0].poll() is None
    if waiting and os.environ.get(STANDBY_ENV, "").split()[:2] == [str(os.getpid()), str(_started[-1][0].pid)]:
        return
    while _started:  # the standby before: taken, ended or failed; its pipes are closed once
        _, request_fd, status_fd = _started.pop()
        _close(request_fd, status_fd)
    request_read, request_write = os.pipe()
    status_read, status_write = os.pipe()
    process = subprocess.Popen([sys.executable, "-I", STANDBY], stdin=request_read, stdout=status_write,
                               stderr=subprocess.DEVNULL, env=tensorflow_only_environment(os.environ))
    _close(request_read, status_write)
    _started.append((process, request_write, status_read))
    os.environ[STANDBY_ENV] = f"{os.getpid()} {process.pid} {request_write} {status_read}"


def run_probe(request: str, timeout: float) -> ProbeExit:
    """Runs the probe on the request file `request` (its folder: the working directory) within `timeout` s."""
    started = time.monotonic()
    handed = _handed(request, timeout)
    if handed is not None:
        return handed
    try:
        done = subprocess.run([sys.executable, "-I", PROBE, request], capture_output=True, text=True,
                              timeout=max(0.0, timeout - (time.monotonic() - started)), check=False,
                              env=tensorflow_only_environment(os.environ), cwd=os.path.dirname(request) or None)
    except subprocess.TimeoutExpired:
        return ProbeExit(None, "")
    return ProbeExit(done.returncode, done.stderr)


def _close(*fds: int) -> None:
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def _standby() -> tuple[int, int, int] | None:
    """(pid, request fd, status fd) of the standby this process may use, taken from the environment: once."""
    try:
        owner, pid, request_fd, status_fd = (int(part) for part in os.environ.pop(STANDBY_ENV, "").split())
    except ValueError:
        return None
    pipes = all(_is_pipe(fd) for fd in (request_fd, status_fd))
    return (pid, request_fd, status_fd) if owner in (os.getpid(), os.getppid()) and pipes else None


def _is_pipe(fd: int) -> bool:
    try:
        return stat.S_ISFIFO(os.fstat(fd).st_mode)
    except OSError:
        return False


def _handed(request: str, timeout: float) -> ProbeExit | None:
    """The probe's end in the standby, or None when there is none or it ended without taking the request."""
    found = _standby()
    if found is None:
        return None
    pid, request_fd, status_fd = found
    try:
        os.write(request_fd, (request + "\n").encode())
    except OSError:  # it has ended: it served a request already, or failed to start
        return None
    status, timed_out = _read_status(status_fd, time.monotonic() + timeout)
    if "pid" not in status and not timed_out:
        return None  # it failed before taking the request: a fresh probe says why
    if timed_out:
        for victim in (status.get("pid"), pid):
            if victim:
                _kill(victim)
        return ProbeExit(None, _output(request), True)
    if "exit" not in status:  # the standby itself was killed while its probe ran
        return ProbeExit(1, _output(request) + "\nthe standby probe ended without the probe's exit status", True)
    return ProbeExit(status["exit"], _output(request), True)


def _read_status(fd: int, deadline: float) -> tuple[dict[str, int], bool]:
    """The standby's `pid N` and `exit CODE` lines, until it closes its end; and whether `deadline` came first."""
    received = b""
    while True:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        received += chunk
    status = {}
    for line in received.decode(errors="replace").splitlines():
        word, _, value = line.partition(" ")
        if word in ("pid", "exit") and value.lstrip("-").isdigit():
            status[word] = int(value)
    return status, not ready


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _output(request: str) -> str:
    try:
        with open(request + ".log", encoding="utf-8", errors="replace") as log:
            return log.read()
    except OSError:
        return ""
