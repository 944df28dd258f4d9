"""A moto S3 server on loopback for the benchmarks that measure s3:// (serving, reader_s3).

    server, env = start_moto(work)        # the AWS variables set in this process, for it and its children
    root = new_bucket() + "/bench"         # "s3://bench-<hex>/bench"
    stop_moto(server)

The server is tests/moto_serialized.py (moto_server with S3's atomic conditional PUTs), the one the tests
start; it is run as a script, so nothing under tests/ is imported.
"""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

MOTO = Path(__file__).parents[1] / "tests" / "moto_serialized.py"
START_SECONDS = 60.0


def start_moto(work: Path) -> tuple[subprocess.Popen, dict[str, str]]:
    """A moto S3 server on 127.0.0.1:<free port>, logging to work/moto.log, and the AWS variables that point at
    it (set in this process for its children too)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = open(work / "moto.log", "wb")  # noqa: SIM115 (the server's lifetime)
    server = subprocess.Popen([sys.executable, str(MOTO), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=log)
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            urllib.request.urlopen(endpoint + "/moto-api/", timeout=1)
            break
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                stop_moto(server)
                raise RuntimeError(f"moto did not start (exit {server.returncode}); see {work / 'moto.log'}")
            time.sleep(0.1)
    env = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
           "AWS_DEFAULT_REGION": "us-east-1"}
    os.environ.update(env)
    return server, env


def stop_moto(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.terminate()
    server.wait(timeout=30)


def new_bucket() -> str:
    """A fresh bucket on the server the AWS variables point at: `s3://bench-<hex>`."""
    import boto3

    name = f"bench-{uuid.uuid4().hex[:10]}"
    boto3.client("s3").create_bucket(Bucket=name)
    return f"s3://{name}"
