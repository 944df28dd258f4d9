"""The lock of a local or volume `write_if` (core/filesystems/lock_file.py): an exclusive-create lock file, with real
threads and processes, no mocks. It excludes threads of one process without flock; processes lose no update; a
holder killed with SIGKILL, or one on another host past the stale bound, is broken; a live one on another host
blocks until the wait bound; a FUSE mount of a bucket is refused. Cluster tier by folder (processes, a volume's
rules), except the mountinfo checks, which are pure (unit)."""
from __future__ import annotations

import fcntl
import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NoReturn

import pytest

import test_conditional_writes as conditional_writes  # its threaded race, reused
from shardflow.core import storage
from shardflow.core.errors import ConfigError, ShardflowError
from shardflow.core.filesystems import lock_file
from shardflow.core.filesystems.local import LOCK_NAME, LocalFileSystem
from shardflow.core.process_identity import process_identity

THREADS, ROUNDS = 8, 5
PROCESSES, INCREMENTS = 4, 50
# A writer's wait bound, below the stale bound: a waiter that took a dead holder's lock for a live one would raise
# LockTimeout (exit 1) before that lock could be broken for its age. What a test checks is the outcome, not a time.
WAIT_BELOW_STALE = lock_file.LOCK_STALE_SECONDS / 3
HOLDER = """
import sys, time
from shardflow.core.filesystems.lock_file import held
with held(sys.argv[1]):
    print("held", flush=True)
    time.sleep(60)
"""


def _no_flock(*_: Any) -> NoReturn:
    raise AssertionError("write_if took an fcntl lock")


def _this_process() -> dict[str, Any]:
    """This process's part of a lock record."""
    return {**process_identity(), "pid_ns": os.readlink("/proc/self/ns/pid")}


def _plant(lock: Path, **record: Any) -> None:
    """A lock file with this record, as a holder that never released it would have left."""
    lock.write_text(json.dumps({"nonce": "planted", "taken_at": time.time(), **record}))


def test_threads_of_one_process_exclude_each_other_without_flock(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """test_conditional_writes' race (threads read one version, then all write over it: one winner a round) with
    THREADS threads and ROUNDS rounds, while any fcntl lock raises."""
    monkeypatch.setattr(fcntl, "flock", _no_flock)
    monkeypatch.setattr(fcntl, "lockf", _no_flock)
    monkeypatch.setattr(conditional_writes, "CONTENDERS", THREADS)
    monkeypatch.setattr(conditional_writes, "ROUNDS", ROUNDS)
    conditional_writes.test_of_racing_writers_with_the_same_token_exactly_one_wins(str(tmp_path))
    assert os.listdir(tmp_path) == ["CURRENT.json"]  # the lock file exists only while held


def increment(counter: str, name: str, start: Any) -> None:
    """A writer process: INCREMENTS compare-and-swap increments of the counter, retried on a conflict; a lock held
    past WAIT_BELOW_STALE raises LockTimeout, so the process fails."""
    volume = LocalFileSystem(lock_wait_seconds=WAIT_BELOW_STALE)  # storage.write_if's local backend, bound lowered
    start.wait()
    for _ in range(INCREMENTS):
        while True:
            data, token = storage.read_with_token(counter)
            record = {"count": json.loads(data)["count"] + 1, "by": name}  # unique: a conflict is never ours
            try:
                volume.write_if(counter, json.dumps(record).encode(), token)
                break
            except storage.WriteConflict:
                continue


def test_processes_lose_no_update_and_break_one_stale_lock_once(tmp_path: Path) -> None:
    """PROCESSES processes increment one counter; they start behind a lock left by a process whose pid is now
    another process (its start time differs), which all of them judge stale at once: one breaks it. At once, not
    for its age: the planted record is fresh and the writers give up before LOCK_STALE_SECONDS (WAIT_BELOW_STALE)."""
    counter = tmp_path / "counter.json"
    counter.write_text(json.dumps({"count": 0, "by": "nobody"}))
    _plant(tmp_path / LOCK_NAME, **{**_this_process(), "started": -1})
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(PROCESSES)
    writers = [context.Process(target=increment, args=(str(counter), f"p{i}", start)) for i in range(PROCESSES)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(timeout=60)
        assert process.exitcode == 0  # no LockTimeout: the planted lock was broken by its pid, not its age
    assert json.loads(counter.read_text())["count"] == PROCESSES * INCREMENTS
    assert os.listdir(tmp_path) == ["counter.json"]  # the stale lock, its claims and the temporary files: gone


def test_a_holder_killed_with_sigkill_is_broken_at_once(tmp_path: Path) -> None:
    lock, pointer = tmp_path / LOCK_NAME, str(tmp_path / "CURRENT.json")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert json.loads(lock.read_text())["pid"] == holder.pid
        with pytest.raises(lock_file.LockTimeout):  # a live holder in another process blocks
            LocalFileSystem(lock_wait_seconds=0.3).write_if(pointer, b"while held", None)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=10)
    assert lock.exists()  # killed: nothing released it
    # Judged dead by its pid: taken for a live holder it would raise LockTimeout before the stale bound broke it.
    token = LocalFileSystem(lock_wait_seconds=WAIT_BELOW_STALE).write_if(pointer, b"after", None)
    assert storage.read_with_token(pointer) == (b"after", token)
    assert os.listdir(tmp_path) == ["CURRENT.json"]


def test_another_hosts_lock_blocks_until_it_is_stale(tmp_path: Path) -> None:
    lock, pointer = tmp_path / LOCK_NAME, str(tmp_path / "CURRENT.json")
    elsewhere = {"host": "elsewhere", "pid": 1, "started": 1, "pid_ns": "pid:[1]"}
    _plant(lock, **elsewhere)
    with pytest.raises(lock_file.LockTimeout) as timeout:  # neither broken nor taken: waited for, then refused
        LocalFileSystem(lock_wait_seconds=0.5).write_if(pointer, b"blocked", None)
    message = str(timeout.value)
    assert isinstance(timeout.value, OSError) and isinstance(timeout.value, ShardflowError) and "\n" not in message
    assert message.startswith(f"{lock} is still held after 0.5 s") and '"host": "elsewhere"' in message
    assert lock.exists() and not os.path.exists(pointer)
    _plant(lock, **elsewhere, taken_at=time.time() - lock_file.LOCK_STALE_SECONDS - 1)
    assert LocalFileSystem(lock_wait_seconds=0.5).write_if(pointer, b"broken", None)
    assert os.listdir(tmp_path) == ["CURRENT.json"]


def test_a_live_holder_on_this_host_is_never_stale(tmp_path: Path) -> None:
    """However old its record: this very process holds it, so it is waited for, not broken."""
    lock = tmp_path / LOCK_NAME
    _plant(lock, **_this_process(), taken_at=time.time() - 10 * lock_file.LOCK_STALE_SECONDS)
    with pytest.raises(lock_file.LockTimeout):
        LocalFileSystem(lock_wait_seconds=0.3).write_if(str(tmp_path / "CURRENT.json"), b"blocked", None)
    assert json.loads(lock.read_text())["nonce"] == "planted"


def test_an_unreadable_lock_is_stale_once_watched_for_the_stale_bound(tmp_path: Path) -> None:
    """A holder killed between the create and the write leaves an empty file: no record, no time, only watching.
    Watched for less than the stale bound it is waited for and left; watched for the bound, it is broken."""
    lock = tmp_path / LOCK_NAME
    lock.write_bytes(b"")
    with pytest.raises(lock_file.LockTimeout, match="by an empty record"):
        with lock_file.held(str(lock), wait_seconds=0.3, stale_seconds=lock_file.LOCK_STALE_SECONDS):
            pass
    assert lock.read_bytes() == b""  # not broken at first sight: its writer may be between the create and the write
    with lock_file.held(str(lock), wait_seconds=WAIT_BELOW_STALE, stale_seconds=0.3):
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert os.listdir(tmp_path) == []


MOUNTINFO = r"""22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
80 27 0:50 / /srv rw shared:5 - nfs4 nas:/srv rw,vers=4.1
81 80 0:51 / /srv/models rw,nosuid,nodev - fuse.gcsfuse models-bucket rw,user_id=0,group_id=0
82 80 0:52 / /srv/s3 rw - fuse mountpoint-s3 rw,user_id=0
83 80 0:53 / /srv/home rw - fuse.sshfs me@host:/home rw
84 80 0:54 / /srv/models\040old rw - nfs4 nas:/old rw"""


@pytest.mark.unit
@pytest.mark.parametrize("path, point, fstype, bucket", [
    ("/srv/models/serving/CURRENT.json", "/srv/models", "fuse.gcsfuse", True),  # the longest prefix, not /srv
    ("/srv/modelsx/serving", "/srv", "nfs4", False),  # a prefix of the name, not of the path
    ("/srv/models old/serving", "/srv/models old", "nfs4", False),  # \040: a space in the mount point
    ("/srv/s3/serving", "/srv/s3", "fuse", True),  # a bare fuse mount, known by its source
    ("/srv/home/serving", "/srv/home", "fuse.sshfs", False),  # FUSE, but not a bucket
    ("/var/serving", "/", "ext4", False),
])
def test_the_mount_of_a_path_is_its_longest_mount_point(path: str, point: str, fstype: str, bucket: bool) -> None:
    mount = lock_file.mount_of(path, MOUNTINFO)
    assert mount is not None and (mount.point, mount.fstype, mount.is_bucket) == (point, fstype, bucket)


@pytest.mark.unit
def test_a_bucket_mount_is_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigError) as refused:
        lock_file.check_mount("/srv/models/serving", MOUNTINFO)
    assert str(refused.value) == (
        "/srv/models/serving is on /srv/models, a fuse.gcsfuse mount of a bucket (models-bucket), where an exclusive "
        "create (the lock of a conditional write) is not atomic across clients: push to the bucket's s3:// or gs:// "
        "URI instead")
    assert refused.value.exit_code == 2
    lock_file.check_mount("/srv/other/serving", MOUNTINFO)  # NFS: no refusal
