"""A server process the tests start on 127.0.0.1 and wait for (moto's S3, fake-gcs-server), and the base of the
fake APIs served from a thread of the test's own process (the KFP and Kubernetes fakes)."""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit


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


class InThreadServer:
    """An HTTP handler class served on a free port of 127.0.0.1 from a daemon thread; a context manager."""

    def _serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self):  # the subclass's own type, for its fixtures
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class JsonHandler(BaseHTTPRequestHandler):
    """A fake API's request handler: reads a request's parts, answers JSON, logs nothing (quiet test output)."""

    def request_parts(self) -> tuple[str, dict[str, str], bytes]:
        """The path, the query (a key's last value) and the body."""
        url = urlsplit(self.path)
        query = {key: values[-1] for key, values in parse_qs(url.query).items()}
        return url.path, query, self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def send_json(self, status: int, answer: Any) -> None:
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass
