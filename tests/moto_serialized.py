"""moto's S3 server as `moto_server -H HOST -p PORT` starts it, but conditional requests one at a time.

moto checks a PUT's `If-Match` / `If-None-Match` and then stores the object in two steps, in whichever
request thread runs them (moto/s3/responses.py `put_object`, no lock between): two racing conditional
PUTs can both pass. S3 decides a conditional PUT atomically. Handling the requests that carry a
precondition one at a time gives this test server S3's semantics for the compare-and-swap that Push
relies on (storage.write_if); every other request is served concurrently, as by moto_server.

    python tests/moto_serialized.py -H 127.0.0.1 -p 5000

`--ignore If-Match --ignore If-None-Match` makes it a store without conditional writes instead (older
MinIO, a gateway that drops the headers): those headers are removed from every request before moto sees
them, so a conditional PUT is a plain one. What the storage layer's probe must catch.

>>> environ_key("If-None-Match")
'HTTP_IF_NONE_MATCH'
"""
from __future__ import annotations

import argparse
import os
import threading
from typing import Any, Callable, Iterable

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import run_simple

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
CONDITIONS = ("HTTP_IF_MATCH", "HTTP_IF_NONE_MATCH")
IGNORABLE = ("If-Match", "If-None-Match")


def environ_key(header: str) -> str:
    """Where WSGI puts a request header."""
    return "HTTP_" + header.upper().replace("-", "_")


def serialized_conditionals(app: Wsgi) -> Wsgi:
    """`app` with every request that has a precondition run under one lock (the check and the store both)."""
    lock = threading.Lock()

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if not any(name in environ for name in CONDITIONS):
            return app(environ, start_response)
        with lock:
            return app(environ, start_response)  # moto's view has stored the object when this returns

    return serve


def ignoring(app: Wsgi, headers: list[str]) -> Wsgi:
    """`app` behind a store that drops `headers` from every request (as if it did not know them)."""
    keys = [environ_key(header) for header in headers]

    def serve(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        for key in keys:
            environ.pop(key, None)
        return app(environ, start_response)

    return serve


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-H", "--host", default="127.0.0.1")
    parser.add_argument("-p", "--port", type=int, required=True)
    parser.add_argument("--ignore", action="append", default=[], choices=IGNORABLE,
                        help="drop this header from every request (repeatable): a store without that condition")
    args = parser.parse_args()
    os.environ.setdefault("MOTO_PORT", str(args.port))  # as moto_server: the port moto names in its URLs
    app = serialized_conditionals(DomainDispatcherApplication(create_backend_app))
    run_simple(args.host, args.port, ignoring(app, args.ignore), threaded=True, request_handler=MotoRequestHandler)


if __name__ == "__main__":
    main()
