"""Throttled S3 (503 SlowDown from a real proxy in front of moto): shardflow retries and ends exact."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from helpers_images import random_pixels, write_csv, write_png
from helpers_s3 import get_bytes, list_keys, upload_tree
from s3_faults import FaultProxy, FaultRule
from shardflow.cli import main as shardflow_main
from shardflow.core import storage


@pytest.fixture
def proxy(s3_server) -> Iterator[FaultProxy]:  # noqa: ANN001 (S3Server)
    """A fault proxy; while the test runs, the AWS variables (and storage's client) point at it."""
    proxy = FaultProxy(s3_server.endpoint)
    storage.forget_clients()  # the cached client was made for the direct endpoint
    saved = os.environ["AWS_ENDPOINT_URL"]
    os.environ["AWS_ENDPOINT_URL"] = proxy.endpoint
    try:
        yield proxy
    finally:
        os.environ["AWS_ENDPOINT_URL"] = saved
        storage.forget_clients()
        proxy.stop()


def test_proxy_forwards_byte_for_byte_and_answers_slow_down(proxy: FaultProxy, s3_server,  # noqa: ANN001
                                                            s3_bucket: str) -> None:
    import boto3
    import botocore.config
    import botocore.exceptions

    no_retries = botocore.config.Config(retries={"total_max_attempts": 1})
    client = boto3.client("s3", endpoint_url=proxy.endpoint, config=no_retries)
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
    proxy.rules += [FaultRule(every=3, limit=6, methods=("PUT", "POST")),
                    FaultRule(every=3, limit=6, methods=("GET", "HEAD"))]
    root = f"s3://{s3_bucket}/root"
    blobs = {f"p/{i}.bin": os.urandom(1000 * i + 1) for i in range(6)}
    big = os.urandom(9 << 20)  # streamed above Beam's 8 MiB part size: a multipart upload of 2 parts
    for name, blob in blobs.items():
        storage.write_bytes(storage.join(root, *name.split("/")), blob)
    with storage.open_write(storage.join(root, "big.bin")) as stream:
        stream.write(big)
    assert all(storage.read_bytes(storage.join(root, *name.split("/"))) == blob for name, blob in blobs.items())
    assert storage.read_bytes(storage.join(root, "big.bin")) == big
    assert storage.list_names(storage.join(root, "p")) == sorted(n.split("/")[1] for n in blobs)
    storage.copy_tree(storage.join(root, "p"), storage.join(root, "q"))
    storage.remove(storage.join(root, "p"))
    assert storage.list_names(root) == ["big.bin", "q"]
    assert storage.read_bytes(storage.join(root, "q", "5.bin")) == blobs["p/5.bin"]
    assert proxy.injected["PUT"] + proxy.injected["POST"] == 6 and proxy.injected["GET"] + proxy.injected["HEAD"] == 6


COMPARED_KEYS = ("features", "splits", "compression", "rows", "accepted", "rejected", "rejected_by_reason",
                 "leakage", "statistics", "schema", "inputs")


def _example_gen(s3_server, data: str, out: str) -> dict:  # noqa: ANN001
    args = ["example-gen", "--index", f"{data}/all.csv", "--data-root", data, "--output", out,
            "--rows-per-chunk", "6", "--num-shards", "2", "--gzip", "--max-reject-fraction", "0.1"]
    assert shardflow_main(args) == 0
    return json.loads(get_bytes(s3_server, f"{out}/manifest.json"))


def test_example_gen_through_slow_downs_equals_the_run_without(proxy: FaultProxy, s3_server,  # noqa: ANN001
                                                               s3_bucket: str,
                                                               tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    rows = [[f"img/{i:02d}.png", i % 2, i] for i in range(30)] + [["img/missing.png", 0, 30]]
    for i in range(30):
        write_png(tmp_path / "data" / "img" / f"{i:02d}.png", random_pixels(rng, (6, 5, 3)))
    write_csv(tmp_path / "data" / "all.csv", ["x", "y", "row_id"], rows)
    data = upload_tree(s3_server, tmp_path / "data", s3_bucket, "data")
    clean = _example_gen(s3_server, data, f"s3://{s3_bucket}/clean")
    assert sum(proxy.injected.values()) == 0 and proxy.forwarded["GET"] > 0  # the clean run went through the proxy

    proxy.rules += [FaultRule(every=4, limit=6, methods=("PUT", "POST")), FaultRule(every=5, limit=6, methods=("GET",))]
    faulty = _example_gen(s3_server, data, f"s3://{s3_bucket}/faulty")  # ~800 requests: every fault is used
    assert proxy.injected["GET"] == 6 and proxy.injected["PUT"] + proxy.injected["POST"] == 6, proxy.injected
    assert {k: faulty[k] for k in COMPARED_KEYS} == {k: clean[k] for k in COMPARED_KEYS}
    assert clean["accepted"] == 30 and clean["rejected_by_reason"] == {"missing_file": 1}
    assert list_keys(s3_server, f"s3://{s3_bucket}/faulty") == list_keys(s3_server, f"s3://{s3_bucket}/clean")
    for relative in list_keys(s3_server, f"s3://{s3_bucket}/clean"):
        if relative != "manifest.json":  # the manifest names its output and run time
            assert get_bytes(s3_server, f"s3://{s3_bucket}/faulty/{relative}") == \
                get_bytes(s3_server, f"s3://{s3_bucket}/clean/{relative}"), relative


READ_WITH_TENSORFLOW = """
import sys
from shardflow.core.cloud_env import enable_tensorflow_filesystems
enable_tensorflow_filesystems(sys.argv[1:])
import tensorflow as tf
data = tf.io.gfile.GFile(sys.argv[1], "rb").read()
print("gfile", len(data), flush=True)
records = list(tf.data.TFRecordDataset(sys.argv[2]).as_numpy_iterator())
print("tfrecord", len(records), sum(map(len, records)))
sys.exit(0)
"""


def test_tensorflow_reads_shards_through_slow_downs_or_fails_loudly(proxy: FaultProxy, s3_bucket: str) -> None:
    """Two shards, each one's first GET answered 503, read by TensorFlow (tensorflow-io's s3).

    GFile recovers exactly. KNOWN BUG (tensorflow-io 0.37.1, reported): TFRecordDataset then fails
    with DataLossError "corrupted record at 0" — loudly, through the records' CRCs, never with wrong
    records. If a newer tensorflow-io recovers, this test demands the exact records.
    """
    from shardflow.core.tfrecord import frame

    shard = b"".join(frame(f"r{i}".encode() * 300) for i in range(100))
    paths = [f"s3://{s3_bucket}/Split-train/data-0000{i}-of-00002.tfrecord" for i in range(2)]
    for path in paths:
        storage.write_bytes(path, shard)
    proxy.rules += [FaultRule(every=1, limit=1, methods=("GET",), pattern=path.split("/")[-1]) for path in paths]
    env = {k: v for k, v in os.environ.items() if not k.startswith("S3_")}  # tensorflow-io's own names: unset
    done = subprocess.run([sys.executable, "-c", READ_WITH_TENSORFLOW, *paths], env=proxy.env(env),
                          capture_output=True, text=True, timeout=300)
    assert proxy.injected["GET"] == 2 or (proxy.injected["GET"] == 1 and done.returncode != 0)
    lines = done.stdout.splitlines()
    assert lines[0] == f"gfile {len(shard)}", done.stderr[-600:]
    if done.returncode == 0:
        assert lines[1] == f"tfrecord 100 {len(shard) - 16 * 100}"
    else:
        assert "DataLossError" in done.stderr and "corrupted record at 0" in done.stderr, done.stderr[-600:]
