"""The process that runs pipeline steps for `shardflow run`: warm (a fork per step) or one step and out.

    python -m shardflow.pipelines.step_worker --fd 5 --warm    # serves tasks on fd 5 until it closes
    python -m shardflow.pipelines.step_worker --fd 5 --warm --light   # the same, without TensorFlow
    python -m shardflow.pipelines.step_worker --fd 5           # one task (`shardflow run --isolated`)

A step runs exactly as its container does on a cluster. The compiled task's command is KFP's
lightweight-component launcher, `sh -ec '…printf "%s" "$0" > ephemeral_component.py;
_KFP_RUNTIME=true python3 -m kfp.dsl.executor_main --component_module_path … "$@"' SOURCE`, with
args `--executor_input {{$}} --function_to_execute NAME`. `run_step` does those same three
things in this interpreter: writes SOURCE to ephemeral_component.py, sets _KFP_RUNTIME, and calls
`kfp.dsl.executor_main.executor_main()` with that argv; so the component function, kfp's Executor
and the output files are the cluster's. Only the shell and the interpreter's start are skipped.

Warm, the worker imports TensorFlow, Beam, TFDV and TFT once (each when a task first needs it:
the request's "imports", or ahead: "ahead", imported after the fork while the task runs, or a message
without a task, while a task runs in the light worker), and forks a child per task; `--light`, it imports
no framework, for the steps that need none (a rerun's fingerprint, report and Push, and ExampleGen on its
own pool, do not wait for TensorFlow's import). A request's "standby" names what the worker starts before
forking (`module:function`): processes a later step hands its work to, found by that step's fork in the
environment it inherits. A child
starts from a process that never ran a step, so nothing a step leaves (the Keras session, the
mixed-precision policy, seeds, environment variables, the exit guard, threads, memory) reaches the
next one; and a step that dies (a segfault, the OOM killer) takes only its child. The result goes
back as JSON: exit code, the one-line error (step_errors.last_error), the seconds, the child's pid.
"""
from __future__ import annotations

import argparse
import ctypes
import gc
import importlib
import json
import os
import select
import signal
import sys
import tempfile
import time
import traceback
from multiprocessing.connection import Connection
from typing import Any, Callable, NoReturn

from ..core.process_defaults import apply_process_defaults

# Imported by a warm worker as it starts: what every step runs through (0.3 s), and, unless --light, TensorFlow,
# which every heavy step needs (3-5 s; an identical rerun's Evaluator too). The rest (Beam 2 s, TFDV 6.5 s, TFT
# 5.6 s) is imported when a task first asks for it (steps.Step.imports): a rerun whose heavy steps are cached
# pays for none of them.
START_IMPORTS = ("kfp.dsl.executor_main", "shardflow.pipelines.step_bodies", "shardflow.pipelines.components")
HEAVY_START_IMPORTS = ("tensorflow",)
_LAUNCHER = ('printf "%s" "$0" > "$program_path/ephemeral_component.py"', "python3 -m kfp.dsl.executor_main")
_PR_SET_PDEATHSIG = 1


def lightweight_call(command: list[str], args: list[str]) -> tuple[str, list[str]]:
    """(component source, executor_main argv) of a KFP lightweight component's container command."""
    if command[:2] != ["sh", "-ec"] or len(command) != 4 or not all(part in command[2] for part in _LAUNCHER):
        raise NotImplementedError(f"a step worker runs KFP lightweight Python components; not {command[:3]}")
    return command[3], list(args)


def run_step(request: dict[str, Any], report: Callable[[dict[str, Any]], None]) -> NoReturn:
    """Runs one task in this process, its output into its log; reports the result, then ends the process."""
    from .step_errors import last_error

    started = time.monotonic()
    _output_to(request["log"])
    print(f"shardflow: task {request['task']} in process {os.getpid()}", flush=True)
    code, own = 0, {}
    try:
        source, argv = lightweight_call(request["command"], request["args"])
        module = os.path.join(tempfile.mkdtemp(prefix="shardflow-step-"), "ephemeral_component.py")
        with open(module, "w") as file:
            file.write(source)
        os.environ["_KFP_RUNTIME"] = "true"
        sys.argv = ["kfp.dsl.executor_main", "--component_module_path", module, *argv]
        from kfp.dsl import executor_main

        executor_main.executor_main()
    except SystemExit as stop:  # reported_step's sys.exit(code) after a ShardflowError
        code = stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1)
    except BaseException as err:  # noqa: BLE001 — a bug: its traceback is the step's log
        traceback.print_exc()
        code, own = 1, {"message": f"{type(err).__name__}: {err}".splitlines()[0], "bug": True}
    recorded = last_error() or own
    sys.stdout.flush()
    sys.stderr.flush()
    report({"exit_code": code, "error": recorded.get("message", ""), "bug": bool(recorded.get("bug", False)),
            "seconds": round(time.monotonic() - started, 3), "pid": os.getpid()})
    os._exit(code)  # no interpreter teardown: tensorflow-io's aborts there (exit_guard.install_exit_guard)


def _output_to(log: str) -> None:
    """Both file descriptors 1 and 2 into the step's log: TensorFlow's C++ lines go there too."""
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _die_with_parent(sig: int) -> None:
    """This process gets `sig` when its parent dies: no step outlives the run that asked for it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):  # not Linux: the parent's EOF still stops the worker between steps
        pass


def _forked(request: dict[str, Any], conn: Connection) -> dict[str, Any]:
    """Runs the task in a child of this warm process; its result, or how it died."""
    read_end, write_end = os.pipe()
    gc.freeze()  # no collection in either process walks (writes to) the objects they share: fewer copied pages
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _die_with_parent(signal.SIGKILL)
        run_step(request, lambda result: os.write(write_end, json.dumps(result).encode()))
    os.close(write_end)
    _import(request.get("ahead", ()))  # while the child runs: what later tasks import (Step.imports)
    received = _collect(read_end, conn, pid)
    _, status = os.waitpid(pid, 0)
    if received:
        return json.loads(received)
    return died(pid, status)


def _collect(read_end: int, conn: Connection, pid: int) -> bytes:
    """The child's result bytes; if the run that asked goes away meanwhile, the child is killed and so is this."""
    chunks = []
    while True:
        ready, _, _ = select.select([read_end, conn.fileno()], [], [])
        if conn.fileno() in ready:  # the run sends nothing while a task runs: this is its end (EOF)
            os.kill(pid, signal.SIGKILL)
            os._exit(1)
        if read_end in ready:
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                os.close(read_end)
                return b"".join(chunks)
            chunks.append(chunk)


def died(pid: int, status: int, who: str = "the step's process") -> dict[str, Any]:
    """The result of a process (`who`, then its pid) that ended without reporting one."""
    if os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status))
        why = f"was killed by {sig.name}" + (" (the kernel's out-of-memory killer sends it)" if sig == signal.SIGKILL else "")
        code = 128 + sig.value
    else:
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1
        why = f"exited with status {code} before reporting"
    return {"exit_code": code or 1, "error": f"{who} {pid} {why}", "bug": False, "pid": pid}


def rss_mb() -> float:
    """This process's resident set size in MB."""
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def serve(fd: int, warm: bool, light: bool = False) -> None:
    """Receives tasks on `fd` and answers each with its result, until the run closes it."""
    _die_with_parent(signal.SIGTERM)
    os.set_inheritable(fd, False)  # a step's own subprocesses must not hold the run's socket open
    conn = Connection(fd)
    os.environ["_KFP_RUNTIME"] = "true"  # as the container's launcher sets it, before kfp is imported
    if warm:
        _import(START_IMPORTS + (() if light else HEAVY_START_IMPORTS))
    conn.send_bytes(json.dumps({"ready": os.getpid(), "rss_mb": rss_mb()}).encode())
    while True:
        try:
            request = json.loads(conn.recv_bytes())
        except EOFError:
            return
        if not warm:  # isolated: the step in this process, which then ends
            run_step(request, lambda result: conn.send_bytes(json.dumps(result).encode()))
        _start(request.get("standby", ()))  # first: its import overlaps this worker's own for the task
        _import(request.get("imports", ()))
        if "task" not in request:  # StepWorker.prepare: for later tasks, while one runs elsewhere; no answer
            continue
        result = _forked(request, conn)
        conn.send_bytes(json.dumps({**result, "worker_rss_mb": rss_mb()}).encode())


def _import(modules: Any) -> None:
    """Imports `modules` into this warm process (for every later fork); a missing one is the step's to report."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            pass


def _start(starters: Any) -> None:
    """Calls each `module:function` (a standby's start) in this warm process, before the forks that use it."""
    for name in starters:
        module, _, function = name.partition(":")
        try:
            getattr(importlib.import_module(module), function)()
        except Exception:  # noqa: BLE001 — the step that would use it starts its own process instead
            traceback.print_exc()


def main() -> None:
    apply_process_defaults()  # this process's entry point: before START_IMPORTS bring TensorFlow
    parser = argparse.ArgumentParser(prog="python -m shardflow.pipelines.step_worker")
    parser.add_argument("--fd", type=int, required=True, help="the socket the run sends tasks on")
    parser.add_argument("--warm", action="store_true", help="import the frameworks once, fork a child per task")
    parser.add_argument("--light", action="store_true", help="warm, without TensorFlow: for the steps needing none")
    args = parser.parse_args()
    serve(args.fd, args.warm, args.light)
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter teardown: with TensorFlow and Beam loaded it took 1.7 s (2 busy cores), which every run
    # waited for at its end (StepWorker.close). Nothing is left to write: each step's child has reported.
    os._exit(0)


if __name__ == "__main__":
    main()
