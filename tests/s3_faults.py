"""A throttling reverse proxy on loopback in front of the test S3 server: real 503 SlowDown answers.

Every request is forwarded byte for byte (method, path and query, headers including Host and the
signature, Range, chunked or Content-Length bodies, HEAD, multipart uploads) except a bounded,
deterministic selection that gets S3's own throttling answer: HTTP 503 with a `SlowDown` XML error
body. Clients then retry as they would against a busy bucket. `injected` counts what was refused.

>>> rule = FaultRule(every=3, limit=2, methods=("PUT",))
>>> [rule.should_fail("PUT", "/b/k") for _ in range(9)]
[False, False, True, False, False, True, False, False, False]
>>> rule.should_fail("GET", "/b/k")
False
"""
from __future__ import annotations

import collections
import http.client
import http.server
import re
import threading
import uuid
from dataclasses import dataclass, field

SLOW_DOWN = ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
             "<Message>Please reduce your request rate.</Message><RequestId>{id}</RequestId>"
             "<HostId>shardflow-fault-proxy</HostId></Error>")
# Hop-by-hop headers are the proxy's own business on each connection (RFC 9110 7.6.1).
HOP_BY_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade"}


@dataclass
class FaultRule:
    """Fails every `every`-th request that matches (method in `methods`, path matches `pattern`),
    at most `limit` times. Counting is per rule and under a lock, so the number is deterministic."""

    every: int = 7
    limit: int = 20
    methods: tuple[str, ...] = ("GET", "PUT", "POST", "HEAD", "DELETE")
    pattern: str = ""
    seen: int = 0
    failed: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def should_fail(self, method: str, path: str) -> bool:
        if method not in self.methods or not re.search(self.pattern, path):
            return False
        with self._lock:
            self.seen += 1
            if self.failed < self.limit and self.seen % self.every == 0:
                self.failed += 1
                return True
        return False


class FaultProxy:
    """Listens on 127.0.0.1:<free port>, forwards to `upstream` (http://host:port)."""

    def __init__(self, upstream: str, rules: list[FaultRule] | None = None) -> None:
        host, port = upstream.removeprefix("http://").rstrip("/").split(":")
        self.upstream = (host, int(port))
        self.rules = rules or []
        self.injected: collections.Counter[str] = collections.Counter()  # method -> 503s sent
        self.forwarded: collections.Counter[str] = collections.Counter()  # method -> requests passed on
        self._lock = threading.Lock()
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def should_fail(self, method: str, path: str) -> bool:
        failed = any(rule.should_fail(method, path) for rule in self.rules)
        with self._lock:
            (self.injected if failed else self.forwarded)[method] += 1
        return failed

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """The AWS variables of `base` with the endpoint pointed at this proxy."""
        return {**base, "AWS_ENDPOINT_URL": self.endpoint}

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _read_body(handler: http.server.BaseHTTPRequestHandler) -> bytes:
    """The request body as sent on the wire (chunked bodies stay chunked, byte for byte)."""
    if handler.headers.get("Transfer-Encoding", "").lower() == "chunked":
        raw = bytearray()
        while True:
            size_line = handler.rfile.readline()
            raw += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:  # trailers, then the empty line
                while True:
                    line = handler.rfile.readline()
                    raw += line
                    if line in (b"\r\n", b"\n", b""):
                        return bytes(raw)
            raw += handler.rfile.read(size + 2)  # data and its CRLF
    length = int(handler.headers.get("Content-Length") or 0)
    return handler.rfile.read(length) if length else b""


def _handler(proxy: FaultProxy) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _serve(self) -> None:
            body = _read_body(self)  # always consumed, so the connection stays usable after a 503
            if proxy.should_fail(self.command, self.path):
                self._send(503, [("Content-Type", "application/xml"), ("Retry-After", "0")],
                           b"" if self.command == "HEAD" else SLOW_DOWN.format(id=uuid.uuid4().hex).encode())
                return
            conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
            try:
                conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
                for name, value in self.headers.items():
                    if name.lower() not in HOP_BY_HOP - {"transfer-encoding"}:
                        conn.putheader(name, value)
                conn.endheaders(body or None)
                response = conn.getresponse()
                data = response.read()  # http.client undoes chunking; we resend with a length
                headers = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_BY_HOP | {"content-length"}]
                self._send(response.status, headers, data, response.getheader("Content-Length"))
            finally:
                conn.close()

        def _send(self, status: int, headers: list[tuple[str, str]], data: bytes, length: str | None = None) -> None:
            self.send_response_only(status)
            for name, value in headers:
                self.send_header(name, value)
            # A HEAD answer announces the object's length without a body.
            self.send_header("Content-Length", length if self.command == "HEAD" and length else str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _serve

    return Handler
