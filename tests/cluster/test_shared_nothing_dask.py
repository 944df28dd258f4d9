"""ExampleGen on a shared-nothing Dask cluster: inputs and outputs only in the S3 server's bucket.

The scheduler and two workers are separate processes (tests/dask_cluster.py) with their own empty
working and temporary directories and HOME; each worker gets the S3 settings only through the AWS_*
variables, and (where this machine allows namespaces, as root here) sees the launcher's pytest
directory as an empty tmpfs and has a network namespace of its own that reaches only the scheduler,
the S3 server and its peer through relays on 127.0.0.1. The Dask run's shards must equal, byte for
byte, the same run on the local FnApiRunner.
"""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from dask_cluster import DaskCluster, can_hide_directories, can_isolate_network
from helpers_images import random_pixels, write_csv, write_png
from helpers_s3 import get_bytes, list_keys, upload_tree
from shardflow.cli import main as shardflow_main
from test_dask_runner import COMPARED_KEYS, DASK_RUNNER

NUM_ROWS = 48
# What Dask itself keeps in a worker's --local-directory (lock files, an empty worker scratch folder).
DASK_OWN = ("global.lock", "purge.lock", ".dirlock")


@pytest.fixture(scope="module")
def cluster(s3_server, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaskCluster]:  # noqa: ANN001
    hide = (tmp_path_factory.getbasetemp(),) if can_hide_directories() else ()
    cluster = DaskCluster(workers=2, env=s3_server.env, hide=hide, isolate_network=can_isolate_network(),
                          reachable=(s3_server.port,))
    from distributed import Client

    warm_up = Client(cluster.address)
    try:  # the workers import TensorFlow and TFDV while the local reference run goes on
        _ = [warm_up.submit(exec, "import shardflow.example_gen.pipeline", workers=[address], pure=False)
             for address in cluster.worker_addresses()]
        yield cluster
    finally:
        warm_up.close()
        cluster.stop()
        assert cluster.alive() == []  # no orphaned nanny or worker


@pytest.fixture(scope="module")
def dataset(s3_server, tmp_path_factory: pytest.TempPathFactory) -> str:  # noqa: ANN001
    """48 rows of 10x8 RGB PNGs plus a missing file, uploaded; returns the s3:// data root."""
    root = tmp_path_factory.mktemp("shared_nothing_data")
    rng = np.random.default_rng(11)
    rows: list[list[object]] = []
    for i in range(NUM_ROWS):
        write_png(root / "img" / f"{i:02d}.png", random_pixels(rng, (10, 8, 3)))
        rows.append([f"img/{i:02d}.png", i % 3, f"site{i % 4}"])
    rows.insert(20, ["img/missing.png", 1, "site0"])
    write_csv(root / "all.csv", ["x", "label", "site"], rows)
    return upload_tree(s3_server, root, s3_server.bucket(), "data")


def _ingest(s3_server, data: str, out: str, beam_args: list[str]) -> dict:  # noqa: ANN001
    args = ["example-gen", "--index", f"{data}/all.csv", "--data-root", data, "--output", out,
            "--rows-per-chunk", "8", "--num-shards", "2", "--gzip", "--max-reject-fraction", "0.1", *beam_args]
    assert shardflow_main(args) == 0
    return json.loads(get_bytes(s3_server, f"{out}/manifest.json"))


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_example_gen_on_a_shared_nothing_cluster_equals_the_local_runner(
        cluster: DaskCluster, dataset: str, s3_server, tmp_path: Path,  # noqa: ANN001
        monkeypatch: pytest.MonkeyPatch) -> None:
    from distributed import Client, get_task_stream

    bucket = s3_server.bucket()
    local = _ingest(s3_server, dataset, f"s3://{bucket}/local", [])
    client_cwd = tmp_path / "client_cwd"
    client_cwd.mkdir()
    monkeypatch.chdir(client_cwd)
    with Client(cluster.address) as client, get_task_stream(client) as stream:
        dask = _ingest(s3_server, dataset, f"s3://{bucket}/dask",
                       [DASK_RUNNER, f"--dask_client_address={cluster.address}", "--dask_npartitions=3"])
    assert {task["worker"] for task in stream.data} == set(cluster.worker_addresses()), "both workers ran tasks"
    assert "DaskRunner" in dask["runner"] and "local process pool" in local["runner"]
    assert {k: dask[k] for k in COMPARED_KEYS} == {k: local[k] for k in COMPARED_KEYS}
    assert local["rows"] == NUM_ROWS + 1 and local["rejected_by_reason"] == {"missing_file": 1}

    shards = sorted(s["path"] for info in local["splits"].values() for s in info["shards"])
    assert len(shards) == 4 and all(p.endswith(".tfrecord.gz") for p in shards)
    for relative in [*shards, "schema.pbtxt", "rejects.jsonl"]:
        assert get_bytes(s3_server, f"s3://{bucket}/dask/{relative}") == \
            get_bytes(s3_server, f"s3://{bucket}/local/{relative}"), relative
    assert list_keys(s3_server, f"s3://{bucket}/dask") == list_keys(s3_server, f"s3://{bucket}/local")

    # Nothing assumed a shared disk: the client's cwd and every worker's own folders hold no output.
    if cluster.isolated:  # each worker's network namespace has its own loopback and nothing else
        with Client(cluster.address) as client:
            assert list(client.run(socket.if_nameindex).values()) == [[(1, "lo")], [(1, "lo")]]
    if cluster.hidden:  # and the launcher's pytest folder (data, outputs, this cwd) was empty for them
        with Client(cluster.address) as client:
            assert list(client.run(os.listdir, str(cluster.hidden[0])).values()) == [[], []]
        assert os.listdir(cluster.hidden[0])
    assert list(client_cwd.iterdir()) == []
    for home in cluster.worker_dirs:
        assert _files(home / "cwd") == [] and _files(home / "tmp") == [], home
        assert all(name.endswith(DASK_OWN) for name in _files(home / "local")), _files(home / "local")
