"""Exclusive-create lock files: a lock that every client of a shared volume honours, threads of one process too.

`held(path)` takes the lock by creating the file `path` with O_CREAT | O_EXCL, which a local disk makes atomic
and NFS (v3 and later) makes atomic on the server: it excludes other hosts, other processes and other threads
alike. (flock did not: on NFS mounted `nolock` or `local_lock` it is node-local, and on NFS it is emulated with
POSIX locks, owned by the process, so two threads of one process no longer exclude each other.) The file holds its
holder's record, one JSON line: host, pid namespace, pid and the pid's start time (`process_identity`), a nonce
and the time it was taken. A waiter retries after a short, growing sleep. The holder removes the file when the
block ends, only while it is still its own (its nonce).

A holder killed while holding leaves its file behind; a waiter judges it stale and breaks it:
- if the holder ran on this host, in this pid namespace: at once if its pid is gone or is another process now,
  never while it runs;
- else once it is LOCK_STALE_SECONDS old, by the record's time or by how long this waiter has watched it unchanged,
  whichever is longer (an unreadable record, whose writer died between the create and the write, by the latter).
Of all the waiters that judged one file stale, one breaks it (`_break`). After LOCK_WAIT_SECONDS of waiting on a
live holder, LockTimeout names the file and its record.

A FUSE mount of a bucket (gcsfuse, s3fs, mountpoint-s3, ...) answers an exclusive create from each client's own
view, not atomically across clients: `refuse_bucket_mount` raises ConfigError there, once per directory.

>>> info = '''27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
... 90 27 0:52 / /mnt/models rw,nosuid,nodev - fuse.gcsfuse models-bucket rw,user_id=0
... 91 27 0:53 / /mnt/models\\\\040b rw - nfs4 nas:/export rw'''
>>> mount_of("/mnt/models/serving", info)
Mount(point='/mnt/models', fstype='fuse.gcsfuse', source='models-bucket')
>>> mount_of("/mnt/models b/serving", info).fstype, mount_of("/mnt/modelsx", info).point
('nfs4', '/')
>>> try:
...     check_mount("/mnt/models/serving", info)
... except ConfigError as refused:
...     print(refused)
/mnt/models/serving is on /mnt/models, a fuse.gcsfuse mount of a bucket (models-bucket), where an exclusive create (the lock of a conditional write) is not atomic across clients: push to the bucket's s3:// or gs:// URI instead
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import random
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import ConfigError, ShardflowError
from ..process_identity import is_local, process_gone, process_identity

# The critical section is one small read, a compare and one small fsynced write renamed into place: measured on a
# local ext4 disk, 0.6 ms median, 3.4 ms p99, 9.4 ms at the most (300 rounds); an NFS round trip or a slow server
# adds milliseconds, not seconds. 30 s is thousands of times that: a live holder is never taken for a dead one, and a
# dead one blocks its directory for 30 s at the most. (Clocks of the volume's clients are assumed within seconds.)
LOCK_STALE_SECONDS = 30.0
LOCK_WAIT_SECONDS = 60.0  # a stale lock's 30 s, then time for the queue behind it to drain
FIRST_SLEEP, MAX_SLEEP = 0.002, 0.05  # a waiter's sleeps, growing by half each time: a few ms at first
# FUSE file systems of object stores, by subtype (fstype fuse.gcsfuse) or, for a bare `fuse`, by source name.
BUCKET_FUSE = frozenset({"gcsfuse", "s3fs", "goofys", "mountpoint-s3", "rclone", "blobfuse", "blobfuse2", "geesefs"})


class LockTimeout(ShardflowError, TimeoutError):
    """A lock a live holder kept past the waiter's bound (an OSError, exit 1)."""


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo: where it is mounted, its file system type and its source."""

    point: str
    fstype: str
    source: str

    @property
    def is_bucket(self) -> bool:
        kind, _, subtype = self.fstype.partition(".")
        return kind in ("fuse", "fuseblk") and (subtype or os.path.basename(self.source)) in BUCKET_FUSE


def mount_of(path: str, mountinfo: str) -> Mount | None:
    """The mount that holds `path` (absolute, links resolved), given /proc/self/mountinfo's text: the longest mount
    point that is `path` or one of its parents; of several at one point, the last (it hides the others)."""
    best: Mount | None = None
    for line in mountinfo.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        rest = fields[fields.index("-", 6) + 1:] + ["", ""]
        point = re.sub(r"\\([0-7]{3})", lambda code: chr(int(code.group(1), 8)), fields[4])  # \040 is a space
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and (best is None or len(point) >= len(best.point)):
            best = Mount(point, rest[0], rest[1])
    return best


def check_mount(directory: str, mountinfo: str) -> None:
    """ConfigError if `directory` is on a FUSE mount of a bucket, according to `mountinfo`'s text."""
    mount = mount_of(os.path.realpath(directory), mountinfo)
    if mount is not None and mount.is_bucket:
        raise ConfigError(
            f"{directory} is on {mount.point}, a {mount.fstype} mount of a bucket ({mount.source}), where an "
            "exclusive create (the lock of a conditional write) is not atomic across clients: push to the "
            "bucket's s3:// or gs:// URI instead")


@functools.lru_cache(maxsize=1024)
def refuse_bucket_mount(directory: str) -> None:
    """`check_mount` on this process's mounts, once per directory (a refusal is not cached: it is raised again)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as stream:
            mountinfo = stream.read()
    except OSError:
        return  # no /proc (not Linux): no mount table to judge by
    check_mount(directory, mountinfo)


@dataclass(frozen=True)
class _Seen:
    """One look at a lock file: which file it was (inode, mtime, bytes) and its record, None if unreadable."""

    identity: tuple[int, int, bytes]
    record: dict[str, Any] | None


def _look(path: str) -> _Seen | None:
    """The lock file at `path` as it is now; None when there is none."""
    try:
        with open(path, "rb") as stream:
            status, raw = os.fstat(stream.fileno()), stream.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(raw)
    except ValueError:  # still being written, or its writer died between the create and the write
        record = None
    return _Seen((status.st_ino, status.st_mtime_ns, raw), record if isinstance(record, dict) else None)


def _is_stale(seen: _Seen, watched: float, stale_seconds: float) -> bool:
    """Whether the holder of `seen`, watched for `watched` seconds by this waiter, is taken to be dead."""
    record = seen.record or {}
    if is_local(record):
        return process_gone(record)  # a holder on this host is known dead or alive: a live one is waited for
    taken = record.get("taken_at")
    age = time.time() - taken if isinstance(taken, (int, float)) else 0.0
    return max(age, watched) > stale_seconds


def _break(path: str, stale: _Seen, stale_seconds: float) -> None:
    """Removes the lock file at `path` if it is still the one judged `stale`.

    A claim, a hard link to the lock file named after the stale file's identity, is made by one waiter only (link
    fails on an existing name): the winner checks that what it linked is the stale file, and only then removes the
    lock, which nobody else can have removed meanwhile (its holder is dead; every other breaker of it lost the
    claim). A fresh lock linked by mistake is left where it is. A claim older than the stale bound belongs to a
    breaker that died within these few lines: it is removed, and the next round breaks again."""
    claim = f"{path}.broken-{hashlib.sha256(repr(stale.identity).encode()).hexdigest()[:16]}"
    try:
        os.link(path, claim)
    except FileNotFoundError:
        return  # released or broken meanwhile
    except FileExistsError:
        with contextlib.suppress(FileNotFoundError):
            if time.time() - os.stat(claim).st_ctime > stale_seconds:
                os.unlink(claim)
        return
    try:
        linked = _look(claim)
        if linked is not None and linked.identity == stale.identity:
            os.unlink(path)
    finally:
        os.unlink(claim)


def _try_create(path: str, record: bytes) -> bool:
    """Creates the lock file holding `record`; False if there is one already."""
    try:
        descriptor = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    try:
        os.write(descriptor, record)
    except BaseException:
        os.unlink(path)  # an empty lock would block every waiter until it is stale
        raise
    finally:
        os.close(descriptor)
    return True


def _acquire(path: str, record: bytes, wait_seconds: float, stale_seconds: float) -> None:
    """Waits until the lock file is created with `record`, breaking a stale one; LockTimeout after `wait_seconds`."""
    start = time.monotonic()
    sleep = FIRST_SLEEP
    first_seen: dict[tuple[int, int, bytes], float] = {}  # when this waiter first saw each lock file
    while not _try_create(path, record):
        seen, now = _look(path), time.monotonic()
        if seen is None:
            continue  # released since the create: try again at once
        if _is_stale(seen, now - first_seen.setdefault(seen.identity, now), stale_seconds):
            _break(path, seen, stale_seconds)
        elif now - start > wait_seconds:
            holder = seen.identity[2].decode("utf-8", "replace").replace("\n", " ") or "an empty record"
            raise LockTimeout(f"{path} is still held after {wait_seconds:g} s of waiting, by {holder}: "
                              "if that holder is gone, remove the file")
        time.sleep(sleep * random.uniform(0.5, 1.0))  # jittered: waiters that woke together do not retry together
        sleep = min(sleep * 1.5, MAX_SLEEP)


@contextlib.contextmanager
def held(path: str, wait_seconds: float = LOCK_WAIT_SECONDS,
         stale_seconds: float = LOCK_STALE_SECONDS) -> Iterator[None]:
    """The lock file `path` created and held for the block; its directory must exist and not be a bucket mount."""
    refuse_bucket_mount(os.path.realpath(os.path.dirname(path) or "."))
    nonce = uuid.uuid4().hex
    record = {**process_identity(), "nonce": nonce, "taken_at": time.time()}
    _acquire(path, json.dumps(record).encode(), wait_seconds, stale_seconds)
    try:
        yield
    finally:
        seen = _look(path)
        if seen is not None and seen.record is not None and seen.record.get("nonce") == nonce:
            os.unlink(path)  # only our own: a holder past the stale bound may have lost it to the next one
