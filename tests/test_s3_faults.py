"""Throttled S3 (503 SlowDown from a real proxy in front of moto): shardflow retries and ends exact."""
from __future__ import annotations

import os
from typing import Iterator

import pytest

from s3_faults import FaultProxy, FaultRule
from shardflow.core import storage


@pytest.fixture
def proxy(s3_server) -> Iterator[FaultProxy]:  # noqa: ANN001 (S3Server)
    """A fault proxy; while the test runs, the AWS variables (and storage's client) point at it."""
    proxy = FaultProxy(s3_server.endpoint)
    storage._object_io.cache_clear()  # the cached client was made for the direct endpoint
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    try:
        yield proxy
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
        storage._object_io.cache_clear()
        proxy.stop()


def test_proxy_forwards_byte_for_byte_and_answers_slow_down(proxy: FaultProxy, s3_server, s3_bucket: str) -> None:  # noqa: ANN001
    import boto3
    import botocore.config
    import botocore.exceptions

    client = boto3.client("s3", endpoint_url=proxy.endpoint, config=botocore.config.Config(retries={"total_max_attempts": 1}))
    payload = os.urandom(70_000)
    client.put_object(Bucket=s3_bucket, Key="a/b.bin", Body=payload)
    assert client.get_object(Bucket=s3_bucket, Key="a/b.bin", Range="bytes=10-19")["Body"].read() == payload[10:20]
    assert client.head_object(Bucket=s3_bucket, Key="a/b.bin")["ContentLength"] == 70_000
    proxy.rules.append(FaultRule(every=1, limit=1, methods=("GET",)))
    with pytest.raises(botocore.exceptions.ClientError) as caught:
        client.get_object(Bucket=s3_bucket, Key="a/b.bin")
    assert caught.value.response["Error"]["Code"] == "SlowDown"
    assert caught.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert client.get_object(Bucket=s3_bucket, Key="a/b.bin")["Body"].read() == payload
    assert proxy.injected == {"GET": 1}
    assert s3_server.client().get_object(Bucket=s3_bucket, Key="a/b.bin")["Body"].read() == payload


def test_storage_retries_through_slow_downs(proxy: FaultProxy, s3_bucket: str) -> None:
    proxy.rules += [FaultRule(every=3, limit=6, methods=("PUT", "POST")), FaultRule(every=3, limit=6, methods=("GET", "HEAD"))]
    root = f"s3://{s3_bucket}/root"
    blobs = {f"p/{i}.bin": os.urandom(1000 * i + 1) for i in range(6)}
    big = os.urandom(9 << 20)  # above Beam's 8 MiB part size: a multipart upload of 2 parts
    for name, blob in blobs.items():
        storage.write_bytes(storage.join(root, *name.split("/")), blob)
    storage.write_bytes(storage.join(root, "big.bin"), big)
    assert all(storage.read_bytes(storage.join(root, *name.split("/"))) == blob for name, blob in blobs.items())
    assert storage.read_bytes(storage.join(root, "big.bin")) == big
    assert storage.list_names(storage.join(root, "p")) == sorted(n.split("/")[1] for n in blobs)
    storage.copy_tree(storage.join(root, "p"), storage.join(root, "q"))
    storage.remove(storage.join(root, "p"))
    assert storage.list_names(root) == ["big.bin", "q"]
    assert storage.read_bytes(storage.join(root, "q", "5.bin")) == blobs["p/5.bin"]
    assert proxy.injected["PUT"] + proxy.injected["POST"] == 6 and proxy.injected["GET"] + proxy.injected["HEAD"] == 6
