"""Local paths (and file://): the OS directly, with writes under a temporary sibling renamed into place.

A conditional write (`write_if`) compares and writes while holding the lock file LOCK_NAME in the target's
directory, taken by an exclusive create (`lock_file.held`: atomic on a local disk and on NFS, between hosts,
processes and threads alike; a lock left by a killed holder is broken once stale), so two writers never both see
the version they expect; the write itself is the usual temporary file renamed into place, so readers, who take no
lock, see the old file or the new one. Tokens are the content's SHA-256. A FUSE mount of a bucket, whose exclusive
create is not atomic across clients, is refused (ConfigError): use the bucket's URI instead.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from typing import BinaryIO, Iterator

from ..uri import local_path, relative_to
from .base import FileSystem, WriteConflict, temp_name
from .lock_file import LOCK_WAIT_SECONDS, held, refuse_bucket_mount

LOCK_NAME = ".write_if.lock"  # in the directory of a conditionally written file, while a write_if holds it


def content_token(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class LocalFileSystem(FileSystem):
    """A local disk or a mounted volume: real directories and an atomic `os.replace`."""

    can_rename = True

    def __init__(self, lock_wait_seconds: float = LOCK_WAIT_SECONDS) -> None:
        self.lock_wait_seconds = lock_wait_seconds  # how long a write_if waits for a live holder of the lock

    def open_read(self, location: str) -> BinaryIO:
        return open(local_path(location), "rb")

    @contextlib.contextmanager
    def open_write(self, location: str, durable: bool = False) -> Iterator[BinaryIO]:
        path = local_path(location)
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        tmp = temp_name(path)
        try:
            with open(tmp, "wb") as stream:
                yield stream
                if durable:
                    stream.flush()
                    os.fsync(stream.fileno())
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)

    def is_file(self, location: str) -> bool:
        return os.path.isfile(local_path(location))

    def is_dir(self, location: str) -> bool:
        return os.path.isdir(local_path(location))

    def list_files(self, location: str) -> list[str]:
        root = local_path(location)
        return sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files)

    def list_names(self, location: str) -> list[str]:
        path = local_path(location)
        return sorted(os.listdir(path)) if os.path.isdir(path) else []

    def relative(self, path: str, root: str) -> str:
        return relative_to(path.replace(os.sep, "/"), local_path(root).replace(os.sep, "/"))

    def size(self, location: str) -> int:
        return os.path.getsize(local_path(location))

    def remove(self, location: str) -> None:
        path = local_path(location)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)

    def makedirs(self, location: str) -> None:
        os.makedirs(local_path(location), exist_ok=True)

    def rename(self, source: str, target: str) -> None:
        os.makedirs(os.path.dirname(local_path(target)) or ".", exist_ok=True)
        os.replace(local_path(source), local_path(target))

    def read_with_token(self, location: str) -> tuple[bytes | None, str | None]:
        try:
            with open(local_path(location), "rb") as stream:
                data = stream.read()
        except FileNotFoundError:
            return None, None
        return data, content_token(data)

    def write_if(self, location: str, data: bytes, expected: str | None) -> str:
        self.check_conditional_writes(location)  # before its directory is made on a bucket's mount
        directory = os.path.dirname(local_path(location)) or "."
        os.makedirs(directory, exist_ok=True)
        with held(os.path.join(directory, LOCK_NAME), self.lock_wait_seconds):  # the compare and the write, one step
            _, current = self.read_with_token(location)
            if current != expected:
                raise WriteConflict.at(location, expected)
            self.write_bytes(location, data, durable=True)
        return content_token(data)

    def check_conditional_writes(self, location: str) -> None:
        """ConfigError if `location` is on a FUSE mount of a bucket (once per directory and process)."""
        refuse_bucket_mount(os.path.realpath(os.path.dirname(local_path(location)) or "."))
