"""The storage layer: every read and write of a shardflow file goes through here, local or remote.

Each public function picks the location's backend once (`filesystems.backend_for`: one
`FileSystem` class per scheme, local paths, s3:// and gs://) and delegates to it; what differs
between schemes lives in those classes (core/filesystems/), never here. What is built from the
backends' operations (existence, copies, moves across schemes, JSON and text) is here, once.

Writes are whole or absent: locally under a temporary sibling renamed into place, remotely as one
object that appears when its upload completes (object stores have no partial objects). A small file
can also be written conditionally, a compare-and-swap (`read_with_token`, then `write_if`): the write
happens only if nobody wrote the file since it was read, or, with a token of None, only if it does not
exist (an exclusive create), atomically against every other conditional write on every scheme. On an
object store that atomicity is the store's; `check_conditional_writes` probes that the store enforces it
(once per bucket and process; every `write_if` there runs it first) and raises UnsafeStoreError if not.

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> write_json(join(root, "a", "x.json"), {"k": 1})
>>> read_json(join(root, "a", "x.json")), list_names(join(root, "a")), exists(join(root, "b"))
({'k': 1}, ['x.json'], False)
>>> remove(join(root, "a")); exists(join(root, "a"))
False
"""
from __future__ import annotations

import json
import shutil
from typing import Any, BinaryIO, ContextManager

from .filesystems import UnsafeStoreError, WriteConflict, backend_for, forget_clients, temp_name
from .uri import basename, is_remote, join, parent, relative_to

__all__ = ["basename", "is_remote", "join", "parent", "relative_to", "temp_name", "open_read", "open_write",
           "read_bytes", "write_bytes", "read_text", "write_text", "read_json", "write_json", "exists",
           "is_file", "is_dir", "list_names", "list_files", "list_relative", "remove", "size", "makedirs",
           "copy_file", "copy_tree", "move", "can_rename", "forget_clients", "read_with_token", "write_if",
           "WriteConflict", "check_conditional_writes", "UnsafeStoreError"]


def open_read(location: str) -> BinaryIO:
    """A binary stream; FileNotFoundError when there is no such file or object."""
    return backend_for(location).open_read(location)


def open_write(location: str, durable: bool = False) -> ContextManager[BinaryIO]:
    """A binary stream whose content appears at `location` only when the block ends without error."""
    return backend_for(location).open_write(location, durable=durable)


def read_bytes(location: str) -> bytes:
    """The whole file; FileNotFoundError when there is none, also when it is removed while being read."""
    return backend_for(location).read_bytes(location)


def write_bytes(location: str, data: bytes, durable: bool = True) -> None:
    """Writes `data` whole or not at all; `durable=False` skips the local fsync (staging files)."""
    backend_for(location).write_bytes(location, data, durable)


def read_with_token(location: str) -> tuple[bytes | None, str | None]:
    """A small file's bytes and the token of that version of it, for `write_if`; (None, None) when there is none.

    Tokens are opaque: the content's SHA-256 locally, the ETag on s3://, the generation on gs://."""
    return backend_for(location).read_with_token(location)


def write_if(location: str, data: bytes, expected: str | None) -> str:
    """Writes `data` whole only if `location` still holds the version `expected` names (None: only if there is
    no file there); returns the new token. WriteConflict when another writer got there first (nothing written).

    A conflict that turns out to be this very write (a request the client retried after it had succeeded)
    is not one: `data` should be unique to the writer (the Pusher's records carry a nonce or a version)."""
    backend = backend_for(location)
    try:
        return backend.write_if(location, data, expected)
    except WriteConflict:
        found, token = backend.read_with_token(location)
        if found == data and token is not None:
            return token
        raise


def check_conditional_writes(location: str) -> None:
    """UnsafeStoreError (exit 2) unless the store under `location` enforces `write_if`'s condition: on s3:// and
    gs:// a probe of the bucket, once per bucket and process (a few requests). A caller may run it up front,
    before any work that would end in a conditional write; `write_if` runs it anyway."""
    backend_for(location).check_conditional_writes(location)


def read_text(location: str) -> str:
    return read_bytes(location).decode("utf-8")


def write_text(location: str, text: str, durable: bool = True) -> None:
    write_bytes(location, text.encode("utf-8"), durable)


def read_json(location: str) -> Any:
    return json.loads(read_bytes(location))


def write_json(location: str, obj: Any, durable: bool = True) -> None:
    write_text(location, json.dumps(obj, indent=2, sort_keys=True) + "\n", durable)


def is_file(location: str) -> bool:
    return backend_for(location).is_file(location)


def is_dir(location: str) -> bool:
    """Locally a directory; remotely a prefix under which at least one object lies."""
    return backend_for(location).is_dir(location)


def exists(location: str) -> bool:
    return is_file(location) or is_dir(location)


def list_files(location: str) -> list[str]:
    """Every file below `location` (recursively), as full locations, sorted."""
    return backend_for(location).list_files(location)


def list_relative(location: str) -> list[str]:
    """Every file below `location` (recursively), relative to it and '/'-separated, sorted."""
    backend = backend_for(location)
    return [backend.relative(path, location) for path in backend.list_files(location)]


def list_names(location: str) -> list[str]:
    """The names directly below `location` (files and directories), sorted."""
    return backend_for(location).list_names(location)


def size(location: str) -> int:
    """A file's size in bytes; FileNotFoundError when there is no such file or object."""
    return backend_for(location).size(location)


def remove(location: str) -> None:
    """Removes a file or a whole tree (remotely: the object and every object below the prefix)."""
    backend_for(location).remove(location)


def makedirs(location: str) -> None:
    """Creates a local directory; object stores have no directories, so nothing to do there."""
    backend_for(location).makedirs(location)


def copy_file(source: str, target: str) -> None:
    """Copies one file, on any two schemes; the target appears whole."""
    with open_read(source) as reader, open_write(target) as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)


def concatenate(sources: list[str], target: str) -> None:
    """The files one after another into `target` (none: an empty file), on any schemes; it appears whole."""
    with open_write(target) as writer:
        for source in sources:
            with open_read(source) as reader:
                shutil.copyfileobj(reader, writer, 1 << 20)


def copy_tree(source: str, target: str, last: tuple[str, ...] = ()) -> None:
    """Copies every file below `source` to the same relative place below `target`; the relative paths in `last`
    after all others (a reader that looks for that file takes the tree for whole once it is there)."""
    for relative in sorted(list_relative(source), key=lambda name: name in last):
        copy_file(join(source, *relative.split("/")), join(target, *relative.split("/")))


def can_rename(location: str) -> bool:
    """Whether the scheme renames a file or a directory atomically (a local disk yes, object stores no)."""
    return backend_for(location).can_rename


def move(source: str, target: str) -> None:
    """An atomic rename where the scheme has one (locally: a file or a directory); else a copy of
    every object, then a delete."""
    backend = backend_for(source)
    if backend.can_rename and backend_for(target) is backend:
        backend.rename(source, target)
        return
    if is_file(source):
        copy_file(source, target)
    else:
        copy_tree(source, target)
    remove(source)
