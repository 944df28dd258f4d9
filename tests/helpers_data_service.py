"""`shardflow data-service` servers started by a test, in processes of their own, killed at its end."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from loopback_server import free_port

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))


class Servers:
    """Server processes started by the test; every one is killed at the end."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir, self.processes = log_dir, {}

    def start(self, name: str, *argv: str) -> subprocess.Popen:
        log = open(self.log_dir / f"{name}.log", "ab")
        self.processes[name] = subprocess.Popen([SHARDFLOW, "data-service", *argv], stdout=log, stderr=log)
        return self.processes[name]

    def wait_for_line(self, name: str, text: str, timeout: float = 120, times: int = 1) -> None:
        """Until the server's log holds `text` `times` times (a restarted server appends to its log)."""
        deadline = time.time() + timeout
        while (self.log_dir / f"{name}.log").read_text().count(text) < times:
            assert self.processes[name].poll() is None, (self.log_dir / f"{name}.log").read_text()[-2000:]
            assert time.time() < deadline, f"{name} never said {text!r}"
            time.sleep(0.1)

    def kill(self, name: str) -> None:
        """SIGKILL: the server gets no chance to say goodbye to anyone."""
        self.processes[name].kill()
        self.processes[name].wait()

    def stop_all(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.kill()
                process.wait()

    def static(self, workers: int, journal: Path | None = None) -> tuple[str, list[int]]:
        """A dispatcher with `workers` fixed workers (a static sharding), all up: its grpc:// address and
        the workers' ports."""
        port, ports = free_port(), [free_port() for _ in range(workers)]
        self.dispatcher_argv = ["dispatcher", "--port", str(port), *(["--journal", str(journal)] if journal else []),
                                *(t for p in ports for t in ("--worker", f"localhost:{p}"))]
        self.start("dispatcher", *self.dispatcher_argv)
        self.wait_for_line("dispatcher", "dispatcher at")
        waits = [self.worker(number, port, worker, wait=False) for number, worker in enumerate(ports)]
        for wait in waits:  # started together: each process's TensorFlow import takes seconds
            wait()
        return f"grpc://localhost:{port}", ports

    def worker(self, number: int, dispatcher: int, port: int, wait: bool = True) -> Callable[[], None]:
        """Worker `number` (again, after a kill: the same port, the same address); `wait`: until it listens, else
        the function that waits for that."""
        name = f"w{number}"
        started = (self.log_dir / f"{name}.log").read_text().count("worker at") if name in self.processes else 0
        self.start(name, "worker", "--dispatcher", f"localhost:{dispatcher}", "--port", str(port))
        listening = lambda: self.wait_for_line(name, "worker at", times=started + 1)  # noqa: E731
        if wait:
            listening()
        return listening
