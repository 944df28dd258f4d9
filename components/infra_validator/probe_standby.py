"""The probe started ahead: TensorFlow imported, waiting for the one request it serves.

Run by path in a fresh interpreter, never as part of shardflow (`probe_process.start_standby` starts it):

    python -I probe_standby.py          # reads one request path on stdin; EOF (nobody will ask): exits

It imports what probe.py imports, as it imports them (TensorFlow without Keras, numpy, TF Serving's
protos: most of a probe's time), then blocks on stdin. Given a request path, it forks: the child is
the probe (probe.py's `main`, loaded by path: `-I` leaves the script's folder off sys.path), with its
output in `<request>.log` and the request's folder as its working directory, as a fresh probe has;
the parent writes `pid N` and then `exit CODE` (the child's exit code, -SIGNAL when killed) on stdout
and ends. The fork happens after the
imports and before any TensorFlow op, as the warm step worker forks its steps. Both die with their parent
(PR_SET_PDEATHSIG): no probe outlives the run that started it.
"""
from __future__ import annotations

import ctypes
import gc
import importlib.util
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):  # not Linux: the closed stdin still ends a waiting standby
        pass


def _probe_module() -> object:
    spec = importlib.util.spec_from_file_location("probe", os.path.join(os.path.dirname(__file__), "probe.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _serve(request: str, probe: object) -> int:
    """Runs the probe on `request` in a fork; the fork's exit code."""
    gc.freeze()  # the child's collections leave the imported objects' pages shared (step_worker does the same)
    pid = os.fork()
    if pid == 0:
        _die_with_parent()
        os.chdir(os.path.dirname(request) or ".")
        log = os.open(request + ".log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        code = 1
        try:
            code = probe.main(["probe.py", request])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    print(f"pid {pid}", flush=True)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def main() -> None:
    _die_with_parent()
    probe = _probe_module()
    import numpy  # noqa: F401  (the imports a probe spends its start on, done ahead)

    probe.import_tensorflow()  # as the probe imports it: without Keras
    from tensorflow_serving.apis import prediction_log_pb2  # noqa: F401

    request = sys.stdin.readline().strip()
    if request:
        print(f"exit {_serve(request, probe)}", flush=True)
    sys.stdout.flush()
    os._exit(0)  # no interpreter teardown: TensorFlow's takes a second


if __name__ == "__main__":
    main()
