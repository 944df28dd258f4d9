"""The exit guard: a process keeps its real exit status although tensorflow-io aborts in teardown.

For process entry points only (the `shardflow` command, a KFP step), never a library call.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys

_exit_status = [0]


def install_exit_guard() -> None:
    """Keeps the process's real exit status although tensorflow-io aborts in interpreter teardown.

    For process entry points only (the `shardflow` command, a KFP step): it replaces `sys.exit` and
    `sys.excepthook` and ends the process with `os._exit`, which a notebook or a library caller must
    never get as a side effect of reading s3://.

    tensorflow-io 0.37's s3 plugin aborts in C++ static destruction after any s3 use ("pure virtual
    method called", exit 134), after all work is done — which would fail a finished KFP step or CLI
    run. A last atexit handler records how Python was exiting (`sys.exit(code)`, or an uncaught
    exception) and leaves with `os._exit`, skipping the C++ teardown.
    """
    if getattr(sys, "_shardflow_exit_guard", False):
        return
    sys._shardflow_exit_guard = True  # type: ignore[attr-defined]
    original_exit, original_hook = sys.exit, sys.excepthook

    def recording_exit(code: object = None) -> None:
        _exit_status[0] = code if isinstance(code, int) else (0 if code is None else 1)
        original_exit(code)

    def recording_hook(*exc_info: object) -> None:
        _exit_status[0] = 1
        original_hook(*exc_info)  # type: ignore[arg-type]

    def leave() -> None:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_exit_status[0])

    sys.exit, sys.excepthook = recording_exit, recording_hook  # type: ignore[assignment]
    atexit.register(leave)
