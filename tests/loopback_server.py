"""A server process the tests start on 127.0.0.1 and wait for (moto's S3, fake-gcs-server)."""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LoopbackServer:
    """Starts `argv(port)` on a free port, logging to `log`, and waits until `probe` answers over HTTP."""

    def __init__(self, name: str, argv: list[str], port: int, probe: str, log: Path, timeout: float,
                 group: bool = False) -> None:
        """`group`: the server in a process group of its own, stopped whole (a server that forks its workers)."""
        self.name, self.port, self.group = name, port, group
        self.endpoint = f"http://127.0.0.1:{port}"
        self._log = open(log, "wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=group)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.endpoint + probe, timeout=2).read()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"{name} exited with {self.process.returncode}; see {log}")
                time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"{name} did not start within {timeout:.0f} s; see {log}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stops the server (and its group's workers): `sig`, then SIGKILL after 10 s."""
        if self.process.poll() is None or self.group:
            self._signal(sig)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self._signal(signal.SIGKILL)
            self.process.wait(10)
        self._log.close()

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig) if self.group else self.process.send_signal(sig)
        except ProcessLookupError:
            pass
