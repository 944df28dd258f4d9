"""Pure functions over storage locations: a local path, or a URI such as s3://bucket/key or gs://bucket/key.

The only place that knows how schemes are spelled. Nothing here touches a filesystem.

>>> is_remote("s3://bucket/data"), is_remote("/data"), is_remote("file:///data")
(True, False, False)
>>> join("s3://bucket/out", "Split-train", "data-00000.tfrecord")
's3://bucket/out/Split-train/data-00000.tfrecord'
>>> join("out", "manifest.json")
'out/manifest.json'
>>> parent("s3://bucket/out/manifest.json"), basename("s3://bucket/out/manifest.json")
('s3://bucket/out', 'manifest.json')
>>> relative_to("s3://bucket/out/Split-train/a", "s3://bucket/out/")
'Split-train/a'
>>> local_path("file:///tmp/x")
'/tmp/x'
"""
from __future__ import annotations

import os
import posixpath
from urllib.parse import unquote

REMOTE_SCHEMES = ("s3", "gs")


def scheme(location: str) -> str:
    """'s3', 'gs', ... or '' for a local path (file:// counts as local)."""
    head, sep, _ = str(location).partition("://")
    if not sep or head == "file":
        return ""
    return head.lower()


def is_remote(location: str) -> bool:
    return scheme(location) != ""


def local_path(location: str | os.PathLike) -> str:
    """A local location as a plain path (strips file://)."""
    text = os.fspath(location)
    return text[len("file://"):] if text.startswith("file://") else text


def split_bucket(location: str) -> tuple[str, str]:
    """('bucket', 'key/with/slashes') of a remote URI."""
    rest = str(location).split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    return bucket, key


def join(base: str | os.PathLike, *parts: str) -> str:
    """Joins with '/' on URIs and the OS separator on local paths."""
    text = os.fspath(base)
    if not is_remote(text):
        return os.path.join(local_path(text), *parts)
    for part in parts:
        text = text.rstrip("/") + "/" + part.lstrip("/")
    return text


def parent(location: str | os.PathLike) -> str:
    text = os.fspath(location)
    if not is_remote(text):
        return os.path.dirname(local_path(text).rstrip(os.sep)) or "."
    head, _, rest = text.rstrip("/").partition("://")
    return f"{head}://{posixpath.dirname(rest)}"


def basename(location: str | os.PathLike) -> str:
    return posixpath.basename(os.fspath(location).rstrip("/"))


def relative_to(location: str, root: str) -> str:
    """`location` below `root` as a '/'-separated relative path; ValueError when it is not below."""
    location, root = os.fspath(location), os.fspath(root).rstrip("/")
    if not location.startswith(root + "/"):
        raise ValueError(f"{location} is not below {root}")
    return location[len(root) + 1:]


def overlaps(first: str, second: str) -> bool:
    """True when two locations are the same or one lies below the other (pure: no symlinks resolved).

    >>> overlaps("s3://b/out", "s3://b/out/x"), overlaps("s3://b/out", "s3://b/outer"), overlaps("a/b", "./a")
    (True, False, True)
    """
    def parts(location: str) -> list[str]:
        if is_remote(location):
            head, _, rest = str(location).partition("://")
            return [head.lower() + ":"] + [p for p in rest.split("/") if p]
        return os.path.abspath(local_path(location)).split(os.sep)

    a, b = parts(first), parts(second)
    shorter = min(len(a), len(b))
    return a[:shorter] == b[:shorter]


def contained_key(root: str, cell: str) -> str | None:
    """The URI that `cell` names below the remote `root`, or None when it would leave `root`.

    A cell is a path relative to root, or an absolute URI that must lie below root. `..` segments
    are refused even when percent-encoded (`%2e%2e`), because an HTTP layer may decode them.

    >>> contained_key("s3://bkt/data", "a/b.png")
    's3://bkt/data/a/b.png'
    >>> contained_key("s3://bkt/data", "s3://bkt/data/a.png")
    's3://bkt/data/a.png'
    >>> [contained_key("s3://bkt/data", c) for c in ("../other/x.png", "a/%2e%2e/%2E%2E/x", "s3://bkt/database/x", "gs://bkt/data/x", "/etc/passwd")]
    [None, None, None, None, None]
    """
    root = root.rstrip("/")
    if "://" in cell:
        if not cell.startswith(root + "/"):
            return None
        cell = cell[len(root) + 1:]
    elif cell.startswith("/"):
        return None
    decoded = unquote(unquote(cell))
    segments = decoded.replace("\\", "/").split("/")
    if any(s == ".." for s in segments) or not cell.strip("/"):
        return None
    return root + "/" + cell.lstrip("/")
