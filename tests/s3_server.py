"""A real S3-protocol server on loopback for the tests: moto's server mode, started by the tests.

Configured only through the standard AWS variables, as a user would configure shardflow.
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

ACCESS_KEY = "AKIASHARDFLOWTEST000"
SECRET_KEY = "shardflow-test-secret-never-logged"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }


class S3Server:
    """`moto_server` on 127.0.0.1:<free port>; `bucket()` makes a fresh bucket."""

    def __init__(self, log_dir: Path) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        server = Path(sys.executable).with_name("moto_server")
        self._log = open(log_dir / "moto.log", "wb")
        self.process = subprocess.Popen([str(server), "-H", "127.0.0.1", "-p", str(self.port)],
                                        stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2).read()
                return
            except OSError:
                if self.process.poll() is not None:
                    raise RuntimeError(f"moto_server exited with {self.process.returncode}")
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("moto_server did not start within 60 s")

    @property
    def env(self) -> dict[str, str]:
        return aws_env(self.endpoint)

    def client(self):  # noqa: ANN201 (boto3 client)
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, aws_access_key_id=ACCESS_KEY,
                            aws_secret_access_key=SECRET_KEY, region_name="us-east-1")

    def bucket(self) -> str:
        name = f"sf-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        pages = self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self._log.close()
