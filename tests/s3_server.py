"""A real S3-protocol server on loopback for the tests: moto's server mode, started by the tests.

Configured only through the standard AWS variables, as a user would configure shardflow. Started through
moto_serialized.py: moto_server itself, except that a conditional PUT's check and store are one step, as
on S3 (moto alone lets two racing `If-None-Match: *` PUTs both succeed); or, given headers to ignore, a
store that drops those conditions (see moto_serialized.py).
"""
from __future__ import annotations

import sys
import uuid
from pathlib import Path

from loopback_server import LoopbackServer, free_port

ACCESS_KEY = "AKIASHARDFLOWTEST000"
SECRET_KEY = "shardflow-test-secret-never-logged"


def aws_env(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
    }


class S3Server(LoopbackServer):
    """`moto_server` on 127.0.0.1:<free port>; `bucket()` makes a fresh bucket. `ignore`: the conditional
    headers (If-Match, If-None-Match) it drops from every request, as a store without them would."""

    def __init__(self, log_dir: Path, ignore: tuple[str, ...] = ()) -> None:
        port = free_port()
        argv = [sys.executable, str(Path(__file__).with_name("moto_serialized.py")), "-H", "127.0.0.1", "-p", str(port)]
        argv += [option for header in ignore for option in ("--ignore", header)]
        super().__init__("moto_server", argv, port, "/moto-api/", log_dir / "moto.log", timeout=60)

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
