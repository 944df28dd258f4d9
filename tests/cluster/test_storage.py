"""The storage layer and the output life cycle on a local disk and on a real S3 server (moto, loopback)."""
from __future__ import annotations

import pytest

from shardflow.core import storage
from shardflow.core.output_dir import OutputDir


@pytest.fixture(params=["local", "s3"])
def root(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    return f"s3://{request.getfixturevalue('s3_bucket')}/root"


def test_write_read_list_remove(root: str) -> None:
    storage.write_json(storage.join(root, "a", "x.json"), {"k": [1, 2]})
    storage.write_bytes(storage.join(root, "a", "b", "y.bin"), b"\x00\x01" * 1000, durable=False)
    assert storage.read_json(storage.join(root, "a", "x.json")) == {"k": [1, 2]}
    assert storage.read_bytes(storage.join(root, "a", "b", "y.bin")) == b"\x00\x01" * 1000
    assert storage.list_names(storage.join(root, "a")) == ["b", "x.json"]
    assert storage.size(storage.join(root, "a", "b", "y.bin")) == 2000
    assert storage.is_dir(storage.join(root, "a")) and not storage.is_file(storage.join(root, "a"))
    assert storage.is_file(storage.join(root, "a", "x.json"))
    storage.remove(storage.join(root, "a"))
    assert not storage.exists(storage.join(root, "a")) and storage.list_names(root) == []


def test_missing_file_is_file_not_found(root: str) -> None:
    with pytest.raises(FileNotFoundError):
        storage.read_bytes(storage.join(root, "nope.bin"))


def test_failed_write_leaves_nothing_locally(tmp_path) -> None:
    target = str(tmp_path / "out.bin")
    with pytest.raises(RuntimeError):
        with storage.open_write(target) as stream:
            stream.write(b"partial")
            raise RuntimeError("killed mid-write")
    assert list(tmp_path.iterdir()) == []


def test_move_and_copy_tree(root: str) -> None:
    for name in ("p/1.txt", "p/q/2.txt"):
        storage.write_text(storage.join(root, *name.split("/")), name)
    storage.copy_tree(storage.join(root, "p"), storage.join(root, "c"))
    storage.move(storage.join(root, "p"), storage.join(root, "m"))
    assert storage.read_text(storage.join(root, "c", "q", "2.txt")) == "p/q/2.txt"
    assert storage.read_text(storage.join(root, "m", "1.txt")) == "p/1.txt"
    assert storage.list_names(root) == ["c", "m"]


def test_lifecycle_rerun_replaces_every_split_and_keeps_no_stale_one(root: str) -> None:
    out = OutputDir(root, owned=("Split-*", "statistics"))
    with out.staged_run():
        for split in ("train", "eval", "old"):
            storage.write_text(storage.join(out.staged(f"Split-{split}"), "data-00000-of-00001"), f"1:{split}")
        out.publish(["Split-train", "Split-eval", "Split-old"])
        out.mark_complete({"run": 1})
    assert out.is_complete()

    with out.staged_run():
        assert not out.is_complete(), "prepare removes the marker first"
        for split in ("train", "eval"):
            storage.write_text(storage.join(out.staged(f"Split-{split}"), "data-00000-of-00002"), f"2:{split}")
        out.publish(["Split-train", "Split-eval"])
        out.mark_complete({"run": 2})
    assert storage.list_names(root) == ["Split-eval", "Split-train", "manifest.json"]
    assert storage.list_names(storage.join(root, "Split-train")) == ["data-00000-of-00002"]
    assert storage.read_json(out.marker_path) == {"run": 2}


def test_killed_run_leaves_no_marker(root: str) -> None:
    out = OutputDir(root, owned=("Split-*",))
    out.prepare()
    out.publish([])
    out.mark_complete({"run": 1})
    out.prepare()  # a second run starts, writes a shard, then dies before publishing
    storage.write_text(storage.join(out.staged("Split-train"), "data-00000-of-00001"), "partial")
    assert not out.is_complete()
    out.prepare()  # the rerun clears what the dead run left
    assert storage.list_names(root) in ([".staging"], [])


def test_tensorflow_reads_and_writes_s3_through_the_aws_variables(s3_bucket: str) -> None:
    from shardflow.core.cloud_env import enable_tensorflow_filesystems

    path = f"s3://{s3_bucket}/tf/records.tfrecord"
    enable_tensorflow_filesystems([path])
    import tensorflow as tf

    with tf.io.TFRecordWriter(path) as writer:
        for i in range(3):
            writer.write(f"record-{i}".encode())
    assert [r.decode() for r in tf.data.TFRecordDataset(path).as_numpy_iterator()] == ["record-0", "record-1", "record-2"]
    assert storage.size(path) == sum(16 + len(f"record-{i}") for i in range(3))


@pytest.mark.parametrize("ending, status", [("sys.exit(3)", 3), ("pass", 0)])
def test_exit_status_survives_tensorflow_io_teardown(s3_server, s3_bucket: str, tmp_path, ending: str, status: int) -> None:
    """tensorflow-io aborts in teardown after s3 use (exit 134); the process keeps its real status."""
    import os
    import subprocess
    import sys

    script = tmp_path / "step.py"
    script.write_text(
        "import sys\n"
        "from shardflow.core.cloud_env import enable_tensorflow_filesystems\n"
        "from shardflow.core.exit_guard import install_exit_guard\n"
        "install_exit_guard()  # what an entry point (the shardflow command, a KFP step) does first\n"
        f"enable_tensorflow_filesystems(['s3://{s3_bucket}/x'])\n"
        "import tensorflow as tf\n"
        f"with tf.io.gfile.GFile('s3://{s3_bucket}/x/done.txt', 'w') as out:\n    out.write('ok')\n"
        f"{ending}\n")
    env = {**os.environ, **s3_server.env}  # the process defaults: conftest.py's, as the command's
    done = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, timeout=120)
    assert done.returncode == status, done.stderr.decode()[-2000:]
    assert storage.read_text(f"s3://{s3_bucket}/x/done.txt") == "ok"
