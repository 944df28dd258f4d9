"""Local paths (and file://): the OS directly, with writes under a temporary sibling renamed into place."""
from __future__ import annotations

import contextlib
import os
import shutil
from typing import BinaryIO, Iterator

from ..uri import local_path, relative_to
from .base import FileSystem, temp_name


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
