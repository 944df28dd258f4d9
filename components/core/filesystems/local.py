"""Local paths (and file://): the OS directly, with writes under a temporary sibling renamed into place.

A conditional write (`write_if`) compares and writes while holding an exclusive `flock` on one lock file
in the target's directory (LOCK_NAME), so two processes, or two threads, never both see the version they
expect; the write itself is the usual temporary file renamed into place, so readers, who take no lock,
see the old file or the new one. Tokens are the content's SHA-256. On a mounted volume this needs locks
that reach every client (NFS has them); a FUSE mount of a bucket has none: use the bucket's URI instead.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
from typing import BinaryIO, Iterator

from ..uri import local_path, relative_to
from .base import FileSystem, WriteConflict, temp_name

LOCK_NAME = ".write_if.lock"  # one per directory that holds conditionally written files; never removed


def content_token(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@contextlib.contextmanager
def _directory_lock(path: str) -> Iterator[None]:
    """An exclusive flock on the lock file beside `path`, released when the block ends (or the process dies)."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    descriptor = os.open(os.path.join(directory, LOCK_NAME), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)  # closing the descriptor releases the lock


class LocalFileSystem(FileSystem):
    """A local disk or a mounted volume: real directories and an atomic `os.replace`."""

    can_rename = True

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
        path = local_path(location)
        with _directory_lock(path):  # the compare and the write, as one step for every other write_if
            _, current = self.read_with_token(location)
            if current != expected:
                raise WriteConflict.at(location, expected)
            self.write_bytes(location, data, durable=True)
        return content_token(data)
