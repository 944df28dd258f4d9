"""Who holds something (a lock file, a version claim), recorded so that another process can tell a live holder
from one that was killed.

A record names the host, the pid namespace, the pid and the pid's start time (clock ticks after boot,
/proc/PID/stat field 22), so a pid the kernel reused for another process is not taken for the holder. Only a
holder in this host's and this pid namespace's view (`is_local`) can be judged dead at once; one elsewhere
(another pod, or a container on this host's network with pids of its own) is judged by the age of what it holds,
by the caller's rule. Without /proc (not Linux) nothing is known: nobody is judged dead.

>>> me = process_identity()
>>> process_gone(me), process_gone({**me, "started": -1}), process_gone({**me, "host": "elsewhere"})
(False, True, False)
"""
from __future__ import annotations

import os
import socket
from typing import Any


def _start_ticks(pid: int) -> int | None:
    """The pid's start time in clock ticks after boot; None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return None
    return int(fields[19]) if fields[0] != b"Z" else None  # field 22 of the line; a zombie is dead


def _pid_namespace() -> str | None:
    """This process's pid namespace ("pid:[4026531836]"); None without /proc."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_identity() -> dict[str, Any]:
    """This process: {"host", "pid_ns", "pid", "started"}."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid_ns": _pid_namespace(), "pid": pid, "started": _start_ticks(pid)}


def is_local(identity: Any) -> bool:
    """Whether `identity`'s pid means the same process here: the same host and pid namespace (known)."""
    return (isinstance(identity, dict) and identity.get("host") == socket.gethostname()
            and identity.get("pid_ns") is not None and identity.get("pid_ns") == _pid_namespace()
            and isinstance(identity.get("pid"), int))


def process_gone(identity: Any) -> bool:
    """Whether the process `identity` names is known to have ended: local (`is_local`), and its pid is not running
    or is another process now. False where nothing here can tell."""
    if not is_local(identity):
        return False
    started = _start_ticks(identity["pid"])
    return started is None or started != identity.get("started")
