"""The run's side of the step worker (step_worker.py): start it, hand it a task, get the result back.

    with StepWorker(warm=True, log=Path("RUN/logs/worker.log")) as worker:
        result = worker.run({"task": "train", "command": [...], "args": [...], "log": "RUN/logs/train.log"})
        result["exit_code"], result["error"]      # 0 and "" when the step succeeded

Warm: one worker process imports the frameworks once (started at once, so its imports overlap the
compile) and forks a child per task. If the worker itself dies (killed), the task it was running
fails with a line saying so and the next task starts a new worker. `max_rss_mb`: the worker is
replaced when its own RSS passes it (a fork-per-task worker only grows by what it imports).
`warm=False` (`--isolated`): a fresh worker per task, which runs the step in its own process and
exits: one interpreter and one import of everything per step, as kfp.local did. `light=True`: a warm
worker that imports no framework, for the steps that need none (the step table's `light`): ready in
~0.3 s, so they never wait for TensorFlow's import.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, TextIO

from .step_worker import died

_POLL_SECONDS = 0.2


class StepWorker:
    """Runs tasks in a warm worker process (a fork each) or, not warm, in a fresh process each."""

    def __init__(self, warm: bool, log: Path, max_rss_mb: float | None = None, echo_to: TextIO | None = None,
                 light: bool = False) -> None:
        self.warm, self.log, self.max_rss_mb, self.echo_to, self.light = warm, log, max_rss_mb, echo_to, light
        self.restarts = 0  # workers replaced after dying or growing past max_rss_mb
        self._process: subprocess.Popen | None = None
        self._conn: Connection | None = None
        self._ready = False  # the worker said "ready" (a warm one: after its imports)

    def __enter__(self) -> "StepWorker":
        if self.warm:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def pid(self) -> int | None:
        """The worker process's pid (None before the first task of an isolated worker)."""
        return self._process.pid if self._process is not None else None

    def start(self) -> None:
        """Starts a worker; a warm one begins importing the frameworks at once."""
        ours, theirs = socket.socketpair()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "a") as log:
            command = [sys.executable, "-m", "shardflow.pipelines.step_worker", "--fd", str(theirs.fileno())]
            mode = (["--warm"] if self.warm else []) + (["--light"] if self.warm and self.light else [])
            self._process = subprocess.Popen(command + mode, pass_fds=[theirs.fileno()],
                                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        theirs.close()
        self._conn, self._ready = Connection(ours.detach()), False

    def run(self, request: dict[str, Any]) -> dict[str, Any]:
        """The task's result: {"exit_code", "error", "bug", "seconds", "pid"}."""
        if self._process is None:
            self.start()
        process, conn = self._process, self._conn
        assert process is not None and conn is not None
        try:
            if not self._ready:  # its first message, after a warm worker's imports
                json.loads(conn.recv_bytes())
                self._ready = True
            conn.send_bytes(json.dumps(request).encode())
            result = self._wait(process, conn, Path(request["log"]))
        except (EOFError, OSError):  # the worker died before or while answering
            result = None
        if result is None:
            return self._lost(request)
        self._after(result)
        return result

    def prepare(self, imports: list[str], standby: list[str]) -> None:
        """Asks a warm worker to import `imports` and start `standby` now, between its tasks (no answer comes):
        what later tasks need, while a task runs in another worker."""
        if not self.warm or not (imports or standby):
            return
        if self._process is None:
            self.start()
        assert self._conn is not None
        try:
            self._conn.send_bytes(json.dumps({"imports": imports, "standby": standby}).encode())
        except OSError:  # it died: its next task fails in one line and starts a new one (run)
            pass

    def _wait(self, process: subprocess.Popen, conn: Connection, log: Path) -> dict[str, Any] | None:
        """The result, or None if the worker died; copies the step's log to `echo_to` as it grows (--verbose)."""
        shown = 0
        while not conn.poll(_POLL_SECONDS):
            shown = self._echo(log, shown)
            if process.poll() is not None:
                return None
        result = json.loads(conn.recv_bytes())
        self._echo(log, shown)
        return result

    def _echo(self, log: Path, shown: int) -> int:
        if self.echo_to is None or not log.is_file():
            return shown
        with open(log, "rb") as file:
            file.seek(shown)
            new = file.read()
        self.echo_to.write(new.decode(errors="replace"))
        self.echo_to.flush()
        return shown + len(new)

    def _after(self, result: dict[str, Any]) -> None:
        """An isolated worker has exited with its task; a warm one past max_rss_mb is replaced."""
        if not self.warm:
            self.close()
        elif self.max_rss_mb is not None and result.get("worker_rss_mb", 0) > self.max_rss_mb:
            self.close()
            self.restarts += 1
            self.start()

    def _lost(self, request: dict[str, Any]) -> dict[str, Any]:
        """The worker died (killed, or it crashed) before answering: the task failed, the next gets a new one."""
        process = self._process
        assert process is not None
        if process.poll() is None:
            process.kill()
        status = process.wait()
        if self._conn is not None:
            self._conn.close()
        self._process, self._conn = None, None
        self.restarts += 1
        raw = (-status & 0x7F) if status < 0 else (status << 8)  # back to a wait status
        return died(process.pid, raw, who=f"the step worker (running {request['task']}): process")

    def close(self) -> None:
        """Stops the worker: closing its socket ends it (and any task it is running)."""
        if self._conn is not None:
            self._conn.close()
        if self._process is not None:
            if not self._ready:  # it was never given a task: still importing (a rerun that needed no TensorFlow)
                self._process.kill()  # it would read the closed socket only after its imports, seconds later
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.kill(self._process.pid, signal.SIGKILL)
                self._process.wait()
        self._process, self._conn = None, None
