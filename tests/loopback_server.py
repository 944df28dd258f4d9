"""A server process the tests start on 127.0.0.1 and wait for (moto's S3, fake-gcs-server)."""
from __future__ import annotations

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

    def __init__(self, name: str, argv: list[str], port: int, probe: str, log: Path, timeout: float) -> None:
        self.name, self.port = name, port
        self.endpoint = f"http://127.0.0.1:{port}"
        self._log = open(log, "wb")
        self.process = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
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

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()
