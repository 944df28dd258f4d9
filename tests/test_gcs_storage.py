"""The storage layer and the output life cycle on gs://, against a real GCS-protocol server (fake-gcs-server).

The same checks as tests/test_storage.py runs on a local disk and on S3, and a small ExampleGen run
with --output gs:// (shards byte-identical to a local run). TensorFlow's own gs:// has
its endpoint compiled in and cannot reach an emulator, so the TensorFlow side of gs:// (tf.data
reading shards, checkpoints) is not testable here and needs a real bucket.
"""
from __future__ import annotations

import os
from typing import Iterator

import pytest

from gcs_server import GcsServer
from shardflow.core import storage
from test_storage import (test_killed_run_leaves_no_marker,
                          test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one,
                          test_missing_file_is_file_not_found, test_move_and_copy_tree, test_write_read_list_remove)

__all__ = ["test_killed_run_leaves_no_marker", "test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one",
           "test_missing_file_is_file_not_found", "test_move_and_copy_tree", "test_write_read_list_remove"]


@pytest.fixture(scope="module")
def gcs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GcsServer]:
    """fake-gcs-server for this module; STORAGE_EMULATOR_HOST points google-cloud-storage at it."""
    server = GcsServer(tmp_path_factory.mktemp("gcs"))
    saved = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ.update(server.env)
    storage._object_io.cache_clear()
    yield server
    storage._object_io.cache_clear()
    server.stop()
    if saved is None:
        os.environ.pop("STORAGE_EMULATOR_HOST", None)
    else:
        os.environ["STORAGE_EMULATOR_HOST"] = saved


@pytest.fixture
def root(gcs_server: GcsServer) -> str:
    """A gs:// root in a fresh bucket (the imported tests take their location from `root`)."""
    return f"gs://{gcs_server.bucket()}/root"


def test_objects_land_in_the_emulator_under_their_keys(gcs_server: GcsServer, root: str) -> None:
    storage.write_bytes(storage.join(root, "Split-train", "data-00000-of-00001.tfrecord.gz"), b"x" * 10)
    storage.write_json(storage.join(root, "manifest.json"), {"rows": 1})
    bucket = root.split("/")[2]
    assert gcs_server.keys(bucket) == ["root/Split-train/data-00000-of-00001.tfrecord.gz", "root/manifest.json"]
    assert storage.size(storage.join(root, "Split-train", "data-00000-of-00001.tfrecord.gz")) == 10
    with pytest.raises(FileNotFoundError):
        storage.size(storage.join(root, "nope"))


def test_large_object_round_trip(root: str) -> None:
    blob = os.urandom(9 << 20)  # above the client's upload chunk: a resumable upload
    storage.write_bytes(storage.join(root, "big.bin"), blob)
    with storage.open_read(storage.join(root, "big.bin")) as stream:
        stream.seek(5 << 20)
        assert stream.read(100) == blob[5 << 20:(5 << 20) + 100]
    assert storage.read_bytes(storage.join(root, "big.bin")) == blob


def test_example_gen_writes_its_output_to_gs(gcs_server: GcsServer, tmp_path) -> None:  # noqa: ANN001
    import json

    import numpy as np

    from helpers_images import random_pixels, write_csv, write_png
    from shardflow.cli import main as shardflow_main

    rng = np.random.default_rng(4)
    for i in range(12):
        write_png(tmp_path / "data" / f"{i}.png", random_pixels(rng, (4, 4, 3)))
    write_csv(tmp_path / "data" / "all.csv", ["x", "y"], [[f"{i}.png", i % 2] for i in range(12)])
    flags = ["--index", str(tmp_path / "data" / "all.csv"), "--data-root", str(tmp_path / "data"), "--num-shards", "2"]
    bucket = gcs_server.bucket()
    assert shardflow_main(["example-gen", *flags, "--output", str(tmp_path / "local")]) == 0
    assert shardflow_main(["example-gen", *flags, "--output", f"gs://{bucket}/out"]) == 0
    manifest = storage.read_json(f"gs://{bucket}/out/manifest.json")
    local = json.loads((tmp_path / "local" / "manifest.json").read_text())
    assert manifest["splits"] == local["splits"] and manifest["accepted"] == 12
    shards = [s["path"] for split in local["splits"].values() for s in split["shards"]]
    stored = [k.removeprefix("out/") for k in gcs_server.keys(bucket) if k.startswith("out/Split-")]
    assert sorted(stored) == sorted(shards)
    for shard in shards:
        assert storage.read_bytes(f"gs://{bucket}/out/{shard}") == (tmp_path / "local" / shard).read_bytes()
    assert not [k for k in gcs_server.keys(bucket) if ".staging" in k or ".tmp" in k]
