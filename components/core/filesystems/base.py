"""The interface every storage scheme implements (`FileSystem`), and the one temporary-name rule.

One subclass per scheme (local paths, s3://, gs://), registered by scheme in this package's
`__init__`; `shardflow.core.storage` picks it once per call from the location and delegates. A
scheme's quirks (S3's empty uploads, an emulator's batch delete, tensorflow-io) live in its class
and nowhere else. The pattern is Beam's `apache_beam.io.filesystem.FileSystem` behind `FileSystems`.

What a backend must guarantee:
- `open_read` gives a seekable binary stream, and raises FileNotFoundError for a missing file;
- every write is whole or absent: nothing appears at the location unless the block ends without error;
- `list_files` lists every file below a location, recursively, as full locations, sorted;
- `remove` removes a file or a whole tree, and is silent when there is nothing there;
- `write_if` replaces a small file only if it is still the version `read_with_token` returned (a token
  of None: only if there is none), atomically against every other `write_if`: a compare-and-swap;
- `check_conditional_writes` raises UnsafeStoreError where the store would not enforce that condition.

>>> temp_name("s3://bucket/out/manifest.json").rsplit("-", 1)[0]
's3://bucket/out/.manifest.json.tmp'
"""
from __future__ import annotations

import abc
import uuid
from typing import BinaryIO, ContextManager

from ..errors import ShardflowError
from ..uri import basename, join, parent, relative_to


def temp_name(location: str) -> str:
    """The one temporary-name scheme: a hidden, unique sibling of `location`."""
    return join(parent(location), f".{basename(location)}.tmp-{uuid.uuid4().hex[:12]}")


class WriteConflict(Exception):
    """A conditional write found another version at its location than the one it expected (nothing written)."""

    @classmethod
    def at(cls, location: str, expected: str | None) -> "WriteConflict":
        return cls(f"{location} was {'created' if expected is None else 'replaced or removed'} by another writer")


class UnsafeStoreError(ShardflowError):
    """A store that accepts conditional writes it must refuse: every compare-and-swap on it would be
    last-writer-wins. Exit 2: a property of the configured store, like a location that is not what an option needs."""

    exit_code = 2


class FileSystem(abc.ABC):
    """One storage scheme's operations, as `shardflow.core.storage` needs them.

    Every location a backend receives is of its own scheme. The concrete methods are the object-store
    defaults (no directories, no rename); a scheme with more overrides them.
    """

    can_rename: bool = False  # an atomic rename of a file or a directory (object stores have none)

    @abc.abstractmethod
    def open_read(self, location: str) -> BinaryIO:
        """A seekable binary stream; FileNotFoundError when there is no such file."""

    @abc.abstractmethod
    def open_write(self, location: str, durable: bool = False) -> ContextManager[BinaryIO]:
        """A stream whose content appears at `location` only when the block ends without error.

        `durable`: the content is on stable storage once the block ends (a local fsync).
        """

    @abc.abstractmethod
    def is_file(self, location: str) -> bool:
        """A file (an object) is at `location`."""

    @abc.abstractmethod
    def is_dir(self, location: str) -> bool:
        """A directory; on an object store, a prefix under which at least one object lies."""

    @abc.abstractmethod
    def list_files(self, location: str) -> list[str]:
        """Every file below `location` (recursively), as full locations, sorted."""

    @abc.abstractmethod
    def size(self, location: str) -> int:
        """The file's size in bytes; FileNotFoundError when there is no such file."""

    @abc.abstractmethod
    def remove(self, location: str) -> None:
        """Removes a file, or a whole tree below `location`; nothing there is not an error."""

    def read_bytes(self, location: str) -> bytes:
        """The whole file; FileNotFoundError when there is none (also when it is removed while being read)."""
        with self.open_read(location) as stream:
            return stream.read()

    def write_bytes(self, location: str, data: bytes, durable: bool) -> None:
        """Writes `data` whole or not at all (a scheme with a cheaper single request overrides this)."""
        with self.open_write(location, durable=durable) as stream:
            stream.write(data)

    def list_names(self, location: str) -> list[str]:
        """The names directly below `location` (files and directories), sorted."""
        return sorted({self.relative(path, location).split("/", 1)[0] for path in self.list_files(location)})

    def relative(self, path: str, root: str) -> str:
        """`path`, one of `list_files(root)`, relative to `root`, '/'-separated."""
        return relative_to(path, root)

    def makedirs(self, location: str) -> None:
        """Creates a directory; object stores have none, so by default there is nothing to do."""

    def rename(self, source: str, target: str) -> None:
        """An atomic rename of a file or a directory: only where `can_rename`."""
        raise NotImplementedError(f"{type(self).__name__} has no atomic rename")

    def enable_tensorflow(self) -> None:
        """Makes TensorFlow's own filesystem able to open this scheme (nothing to do by default)."""

    def read_with_token(self, location: str) -> tuple[bytes | None, str | None]:
        """A small file's bytes and a token naming that version of it; (None, None) when there is none."""
        raise NotImplementedError(f"{type(self).__name__} has no conditional writes (read_with_token, write_if)")

    def write_if(self, location: str, data: bytes, expected: str | None) -> str:
        """Writes `data` whole only if the file is still the version `expected` names (None: only if there is
        no file); returns the new version's token. WriteConflict, with nothing written, otherwise."""
        raise NotImplementedError(f"{type(self).__name__} has no conditional writes (read_with_token, write_if)")

    def check_conditional_writes(self, location: str) -> None:
        """UnsafeStoreError unless the store under `location` enforces `write_if`'s condition (a scheme that
        cannot be wrong about it, or checks it elsewhere, has nothing to do)."""
