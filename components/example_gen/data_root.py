"""Where an index cell's file is: containment in the data root, then the bytes, or a `BadCell`.

The data root is a local folder (`DataRoot`: symlink-aware, O_NOFOLLOW fast path) or an object-store
prefix (`RemoteDataRoot`: `uri.contained_key` decides containment); `open_data_root` picks one.
Every failure raises `BadCell` with a short `code` (for counting) and a readable reason.

>>> for root in (open_data_root("/data"), open_data_root("s3://bkt/data")):
...     try:
...         root.resolve("../etc/passwd")
...     except BadCell as err:
...         print(err.code, "|", err.reason)
path_escapes_root | path escapes the data root: ../etc/passwd
path_escapes_root | path escapes the data root: ../etc/passwd
"""
from __future__ import annotations

import errno
import os
import stat

from ..core import storage, uri


class BadCell(ValueError):
    def __init__(self, code: str, reason: str) -> None:
        super().__init__(reason)
        self.code = code
        self.reason = reason


def too_many_pixels(width: int, height: int, max_pixels: int) -> BadCell:
    return BadCell("too_many_pixels", f"image of {width}x{height} exceeds the limit of {max_pixels} pixels")


def _escapes(cell: str) -> BadCell:
    return BadCell("path_escapes_root", f"path escapes the data root: {cell}")


def _non_empty(cell: str, data: bytes) -> bytes:
    if not data:
        raise BadCell("empty_file", f"zero-byte file: {cell}")
    return data


class DataRoot:
    """Resolves index cells to files strictly inside the data root (symlinks included)."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._cell_dirs: dict[str, str] = {}  # a cell's folder text → its real folder, with a final "/"

    def resolve(self, cell: str) -> str:
        """The cell's real path; BadCell `path_escapes_root` when it is not inside the root."""
        candidate = cell if os.path.isabs(cell) else os.path.join(self.root, cell)
        real = self._via_folder(cell)
        if real is None or os.path.islink(candidate):
            real = os.path.realpath(candidate)
        if not real.startswith(self._prefix):
            raise _escapes(cell)
        return real

    def _via_folder(self, cell: str) -> str | None:
        """The cell's real path if its last part is not a symlink, or None when only `resolve` can decide.

        Each folder is resolved once (keeping realpath off the per-row cost), looked up by the
        cell's own text, which costs less per row than building and splitting the joined path.
        `_open` opens the result with O_NOFOLLOW: a final symlink then fails the open (ELOOP) and
        goes through `resolve`, which checks where it points.
        """
        slash = cell.rfind(os.sep)
        name = cell[slash + 1:]
        if name in ("", ".", ".."):
            return None
        folder = cell[:slash + 1]
        real_folder = self._cell_dirs.get(folder)
        if real_folder is None:
            real = os.path.realpath(os.path.join(self.root, folder))
            real_folder = self._cell_dirs.setdefault(folder, real.rstrip(os.sep) + os.sep)
        real = real_folder + name
        return real if real.startswith(self._prefix) else None

    def _open(self, cell: str) -> int:
        # O_NONBLOCK: opening a named pipe must not hang the worker (no effect on regular files).
        flags = os.O_RDONLY | os.O_NONBLOCK
        path = self._via_folder(cell)
        try:
            if path is not None:
                try:
                    return os.open(path, flags | os.O_NOFOLLOW)
                except OSError as err:
                    if err.errno != errno.ELOOP:
                        raise
            return os.open(self.resolve(cell), flags)
        except BadCell:
            raise
        except FileNotFoundError as err:
            raise BadCell("missing_file", f"missing file: {cell}") from err
        except (OSError, ValueError) as err:  # ValueError: a NUL byte in the path
            raise BadCell("unreadable_file", f"unreadable file {cell}: {getattr(err, 'strerror', None) or err}") from err

    def read(self, cell: str) -> bytes:
        """The file's bytes, after the containment, existence and type checks."""
        fd = self._open(cell)
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise BadCell("is_directory", f"is a directory, not a file: {cell}")
            if not stat.S_ISREG(info.st_mode):  # fifo, socket, device
                raise BadCell("unreadable_file", f"unreadable file {cell}: not a regular file")
            # Raw reads: faster than a buffered file object. A short read of a regular file is its
            # end, so the usual case costs one read; a file that grew meanwhile is read to its end.
            data = os.read(fd, info.st_size + 1)
            if len(data) > info.st_size:
                blocks = [data]
                while block := os.read(fd, 1 << 20):
                    blocks.append(block)
                data = b"".join(blocks)
        except OSError as err:
            raise BadCell("unreadable_file", f"unreadable file {cell}: {err.strerror or err}") from err
        finally:
            os.close(fd)
        return _non_empty(cell, data)


class RemoteDataRoot:
    """Resolves index cells to objects strictly below an s3:// or gs:// prefix (`uri.contained_key`).

    A cell is a key relative to the root, or an absolute URI below it; `..` (also percent-encoded),
    other buckets or prefixes and local absolute paths are refused before anything is read.
    """

    def __init__(self, root: str) -> None:
        self.root = root.rstrip("/")

    def resolve(self, cell: str) -> str:
        key = uri.contained_key(self.root, cell)
        if key is None:
            raise _escapes(cell)
        return key

    def read(self, cell: str) -> bytes:
        location = self.resolve(cell)
        try:
            data = storage.read_bytes(location)
        except FileNotFoundError as err:
            if storage.is_dir(location):  # only on the failure path: one more listing
                raise BadCell("is_directory", f"is a directory, not a file: {cell}") from err
            raise BadCell("missing_file", f"missing file: {cell}") from err
        except Exception as err:  # noqa: BLE001  (the store's client raises its own error types)
            raise BadCell("unreadable_file", f"unreadable file {cell}: {type(err).__name__}") from err
        return _non_empty(cell, data)


def open_data_root(root: str) -> DataRoot | RemoteDataRoot:
    """The data root of a local folder or of an object-store prefix."""
    return RemoteDataRoot(root) if uri.is_remote(root) else DataRoot(root)
