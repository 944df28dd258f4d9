"""The storage backends by scheme: the one switch from a location to the class that handles it.

`backend_for(location)` reads the scheme once (`uri.scheme`: '' for a local path or file://) and
returns that scheme's `FileSystem`, one instance per scheme and process, which keeps its client.
`shardflow.core.storage` calls it in every public function; nothing else in shardflow chooses a
backend. A new scheme is one `FileSystem` subclass and one entry in `BACKENDS` (or `register`):
docs/storage.md, "Adding a scheme".

>>> type(backend_for("/tmp/x")).__name__, type(backend_for("s3://b/k")).__name__, type(backend_for("gs://b/k")).__name__
('LocalFileSystem', 'S3FileSystem', 'GcsFileSystem')
>>> backend_for("file:///tmp/x") is backend_for("/tmp/y")
True
>>> backend_for("az://container/x")
Traceback (most recent call last):
...
ValueError: unsupported storage scheme 'az':// (supported: local paths, gs://, s3://)
"""
from __future__ import annotations

import functools
from typing import Callable

from ..uri import scheme
from .base import FileSystem, UnsafeStoreError, WriteConflict, temp_name
from .gcs import GcsFileSystem
from .local import LocalFileSystem
from .s3 import S3FileSystem

__all__ = ["FileSystem", "UnsafeStoreError", "WriteConflict", "backend_for", "backend_of_scheme", "register",
           "unregister", "forget_clients", "temp_name"]

BACKENDS: dict[str, Callable[[], FileSystem]] = {"": LocalFileSystem, "s3": S3FileSystem, "gs": GcsFileSystem}


@functools.lru_cache(maxsize=None)
def backend_of_scheme(name: str) -> FileSystem:
    """The backend of scheme `name` ('' for local paths), made once per process."""
    factory = BACKENDS.get(name)
    if factory is None:
        supported = ", ".join(["local paths"] + [f"{s}://" for s in sorted(BACKENDS) if s])
        raise ValueError(f"unsupported storage scheme {name!r}:// (supported: {supported})")
    return factory()


def backend_for(location: str) -> FileSystem:
    """The backend that handles `location`, chosen by its scheme."""
    return backend_of_scheme(scheme(location))


def register(name: str, factory: Callable[[], FileSystem]) -> None:
    """Adds (or replaces) the backend of scheme `name`; lower-case, as `uri.scheme` spells it."""
    BACKENDS[name] = factory
    backend_of_scheme.cache_clear()


def unregister(name: str) -> None:
    """Removes the backend of scheme `name` (a test's own scheme, when the test ends)."""
    BACKENDS.pop(name, None)
    backend_of_scheme.cache_clear()


def forget_clients() -> None:
    """Drops this process's backends and their clients: a forked child makes its own (connections are not fork-safe)."""
    backend_of_scheme.cache_clear()
