"""The storage layer and the output life cycle on gs://, against a real GCS-protocol server (fake-gcs-server).

The same checks as tests/cluster/test_storage.py runs on a local disk and on S3 (ExampleGen on gs:// is in
tests/cluster/test_s3_example_gen.py). TensorFlow's own gs:// has
its endpoint compiled in and cannot reach an emulator, so the TensorFlow side of gs:// (tf.data
reading shards, checkpoints) is not testable here and needs a real bucket.
"""
from __future__ import annotations

import os

import pytest

from gcs_server import GcsServer
from shardflow.core import storage
from test_storage import (test_killed_run_leaves_no_marker,
                          test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one,
                          test_missing_file_is_file_not_found, test_move_and_copy_tree, test_write_read_list_remove)

__all__ = ["test_killed_run_leaves_no_marker", "test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one",
           "test_missing_file_is_file_not_found", "test_move_and_copy_tree", "test_write_read_list_remove"]


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
