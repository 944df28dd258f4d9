"""The scheme registry is storage's one switch: a scheme registered here, and nothing else changed, passes
the same storage and output life-cycle checks as local disk, S3 and GCS (tests/cluster/test_storage.py).

`MemoryFileSystem` is a real backend (an object store kept in a dict, with object-store semantics: no
directories, no rename), registered under the made-up scheme mem://. These tests need no server: unit tier.
"""
from __future__ import annotations

import contextlib
import io
from typing import BinaryIO, Iterator

import pytest

from shardflow.core import filesystems, storage
from shardflow.core.cloud_env import enable_tensorflow_filesystems
from shardflow.core.filesystems import FileSystem
from test_storage import (test_killed_run_leaves_no_marker,
                          test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one,
                          test_missing_file_is_file_not_found, test_move_and_copy_tree, test_write_read_list_remove)

pytestmark = pytest.mark.unit

__all__ = ["test_killed_run_leaves_no_marker", "test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one",
           "test_missing_file_is_file_not_found", "test_move_and_copy_tree", "test_write_read_list_remove"]


class MemoryFileSystem(FileSystem):
    """mem://bucket/key: objects in a dict; an object appears only when its write completes."""

    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.tensorflow_enabled = 0

    def open_read(self, location: str) -> BinaryIO:
        if location not in self.objects:
            raise FileNotFoundError(f"no such object: {location}")
        return io.BytesIO(self.objects[location])

    @contextlib.contextmanager
    def open_write(self, location: str, durable: bool = False) -> Iterator[BinaryIO]:
        stream = io.BytesIO()
        yield stream  # an exception here leaves nothing behind
        self.objects[location] = stream.getvalue()

    def is_file(self, location: str) -> bool:
        return location in self.objects

    def is_dir(self, location: str) -> bool:
        return bool(self.list_files(location))

    def list_files(self, location: str) -> list[str]:
        prefix = location.rstrip("/") + "/"
        return sorted(key for key in self.objects if key.startswith(prefix))

    def size(self, location: str) -> int:
        return len(self.open_read(location).getvalue())  # type: ignore[attr-defined]

    def remove(self, location: str) -> None:
        for key in self.list_files(location) + [location]:
            self.objects.pop(key, None)

    def enable_tensorflow(self) -> None:
        self.tensorflow_enabled += 1


@pytest.fixture
def memory() -> Iterator[MemoryFileSystem]:
    """mem:// registered for the test: one instance, so the test can look inside it."""
    backend = MemoryFileSystem()
    filesystems.register("mem", lambda: backend)
    yield backend
    filesystems.unregister("mem")


@pytest.fixture(params=["local", "mem"])
def root(request: pytest.FixtureRequest, tmp_path) -> str:
    """The imported checks' location: a local directory, or a prefix on the registered mem:// scheme."""
    if request.param == "local":
        return str(tmp_path / "root")
    request.getfixturevalue("memory")
    return "mem://bucket/root"


def test_an_unregistered_scheme_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unsupported storage scheme 'mem'"):
        storage.read_bytes("mem://bucket/x")


def test_the_registered_backend_holds_what_storage_wrote(memory: MemoryFileSystem) -> None:
    storage.write_json("mem://bucket/out/manifest.json", {"rows": 2})
    with pytest.raises(RuntimeError):
        with storage.open_write("mem://bucket/out/part.bin") as stream:
            stream.write(b"partial")
            raise RuntimeError("killed mid-write")
    assert memory.objects == {"mem://bucket/out/manifest.json": b'{\n  "rows": 2\n}\n'}
    assert filesystems.backend_for("mem://other/x") is memory and storage.exists("mem://bucket/out")


def test_moves_and_copies_cross_schemes(memory: MemoryFileSystem, tmp_path) -> None:
    local = str(tmp_path / "model")
    storage.write_text(storage.join(local, "variables", "v.index"), "weights")
    storage.write_text(storage.join(local, "saved_model.pb"), "graph")
    storage.move(local, "mem://bucket/model")  # no rename across schemes: a copy, then a delete
    assert sorted(memory.objects) == ["mem://bucket/model/saved_model.pb", "mem://bucket/model/variables/v.index"]
    assert not storage.exists(local)
    storage.copy_tree("mem://bucket/model", str(tmp_path / "back"))
    assert storage.read_text(str(tmp_path / "back" / "variables" / "v.index")) == "weights"
    storage.move("mem://bucket/model/saved_model.pb", "mem://bucket/kept.pb")  # no rename within mem:// either
    assert storage.list_names("mem://bucket") == ["kept.pb", "model"] and storage.size("mem://bucket/kept.pb") == 5


def test_tensorflow_is_prepared_once_per_scheme_by_its_backend(memory: MemoryFileSystem) -> None:
    enable_tensorflow_filesystems(["mem://bucket/a", "mem://bucket/b", "/local/data", "hdfs://left/to/tensorflow"])
    assert memory.tensorflow_enabled == 1


def test_one_backend_per_scheme_until_clients_are_forgotten() -> None:
    first = filesystems.backend_for("s3://bucket/a")
    assert filesystems.backend_for("s3://other/b") is first
    storage.forget_clients()  # what a forked worker does: its own clients, not its parent's connections
    assert filesystems.backend_for("s3://bucket/a") is not first
