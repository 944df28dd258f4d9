"""The storage layer: every read and write of a shardflow file goes through here, local or remote.

Local paths use the OS directly (atomic `os.replace`, `O_NOFOLLOW` where callers ask for it).
s3:// and gs:// use Apache Beam's own object-store clients (`S3IO`, `GcsIO`) — the code Dataflow,
Flink and Dask workers use — configured the ecosystem's way: S3 from `AWS_ENDPOINT_URL`,
`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION` and `~/.aws` (boto3's chain),
GCS from Application Default Credentials (and `STORAGE_EMULATOR_HOST`). One client per scheme and
process is kept: Beam's `FileSystems` builds a new boto3 session per call (~180 ms measured here,
against ~8 ms per read with a kept client).

Writes are whole or absent: locally under a temporary sibling renamed into place, remotely as one
object that appears when its upload completes (object stores have no partial objects).

>>> import tempfile
>>> root = tempfile.mkdtemp()
>>> write_json(join(root, "a", "x.json"), {"k": 1})
>>> read_json(join(root, "a", "x.json")), list_names(join(root, "a")), exists(join(root, "b"))
({'k': 1}, ['x.json'], False)
>>> remove(join(root, "a")); exists(join(root, "a"))
False
"""
from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import shutil
import uuid
from typing import Any, BinaryIO, Iterator

from .uri import basename, is_remote, join, local_path, parent, relative_to, scheme, split_bucket

SINGLE_PUT_BYTES = 64 << 20  # in-memory payloads below this go up in one request

__all__ = ["basename", "is_remote", "join", "parent", "relative_to", "temp_name", "open_read", "open_write",
           "read_bytes", "write_bytes", "read_text", "write_text", "read_json", "write_json", "exists",
           "is_file", "is_dir", "list_names", "list_files", "remove", "size", "makedirs", "copy_file",
           "copy_tree", "move", "forget_clients"]


def temp_name(location: str) -> str:
    """The one temporary-name scheme: a hidden, unique sibling of `location`."""
    return join(parent(location), f".{basename(location)}.tmp-{uuid.uuid4().hex[:12]}")


@functools.lru_cache(maxsize=None)
def _object_io(kind: str) -> Any:
    """Beam's client for `kind` (s3 or gs), one per process, from the environment's settings."""
    from apache_beam.options.pipeline_options import PipelineOptions

    if kind == "s3":
        from apache_beam.io.aws.s3io import S3IO

        return S3IO(options=PipelineOptions([]))  # endpoint, keys and region from boto3's chain
    if kind == "gs":
        from apache_beam.io.gcp.gcsio import GcsIO

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            # An emulator takes no credentials; Beam would first retry an ADC lookup for ~35 s.
            from google.cloud import storage as gcs

            return GcsIO(storage_client=gcs.Client(), pipeline_options=PipelineOptions([]))
        return GcsIO(pipeline_options=PipelineOptions([]))
    raise ValueError(f"unsupported storage scheme {kind!r}:// (supported: local paths, s3://, gs://)")


def forget_clients() -> None:
    """Drops this process's object-store clients: a forked child makes its own (connections are not fork-safe)."""
    _object_io.cache_clear()


def _io(location: str) -> Any:
    return _object_io(scheme(location))


def _is_missing(error: Exception) -> bool:
    return getattr(error, "code", None) == 404 or type(error).__name__ == "NotFound"


def open_read(location: str) -> BinaryIO:
    """A binary stream; FileNotFoundError when there is no such file or object."""
    if not is_remote(location):
        return open(local_path(location), "rb")
    try:
        return _io(location).open(location, "rb")
    except Exception as error:  # Beam raises its clients' own errors for a missing object
        if _is_missing(error):
            raise FileNotFoundError(f"no such object: {location}") from None
        raise


@contextlib.contextmanager
def open_write(location: str, durable: bool = False) -> Iterator[BinaryIO]:
    """A binary stream whose content appears at `location` only when the block ends without error."""
    if is_remote(location):
        stream = _io(location).open(location, "wb")
        try:
            yield stream
        except BaseException:
            _abandon(stream)
            raise
        if scheme(location) == "s3" and stream.tell() == 0:
            _put_empty_s3(location, stream)
            return
        stream.close()  # completes the upload: the object appears whole
        return
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


def _abandon(stream: BinaryIO) -> None:
    """Marks a failed upload's stream closed without completing it.

    Closing it normally would complete the upload and publish a partial object, and so would the
    garbage collector's close; the incomplete upload stays invisible (buckets expire those).
    """
    raw = getattr(stream, "raw", None)
    if isinstance(raw, io.RawIOBase):
        io.RawIOBase.close(raw)  # the base close: skips the uploader's finish


def _put_empty_s3(location: str, stream: BinaryIO) -> None:
    """S3 refuses to complete a multipart upload without parts: an empty object is one plain PUT."""
    _put_s3(location, b"")
    bucket, key = split_bucket(location)
    _io(location).client.client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=stream.raw._uploader.upload_id)


def _put_s3(location: str, data: bytes) -> None:
    """One PUT (Beam's stream takes three requests: start, part, complete); atomic like any PUT."""
    bucket, key = split_bucket(location)
    _io(location).client.client.put_object(Bucket=bucket, Key=key, Body=data)  # Beam's client wraps boto3's


def read_bytes(location: str) -> bytes:
    with open_read(location) as stream:
        return stream.read()


def write_bytes(location: str, data: bytes, durable: bool = True) -> None:
    """Writes `data` whole or not at all; `durable=False` skips the local fsync (staging files)."""
    if scheme(location) == "s3" and len(data) < SINGLE_PUT_BYTES:
        _put_s3(location, data)
        return
    with open_write(location, durable=durable) as stream:
        stream.write(data)


def read_text(location: str) -> str:
    return read_bytes(location).decode("utf-8")


def write_text(location: str, text: str, durable: bool = True) -> None:
    write_bytes(location, text.encode("utf-8"), durable)


def read_json(location: str) -> Any:
    return json.loads(read_bytes(location))


def write_json(location: str, obj: Any, durable: bool = True) -> None:
    write_text(location, json.dumps(obj, indent=2, sort_keys=True) + "\n", durable)


def _prefix(location: str) -> str:
    return location.rstrip("/") + "/"


def is_file(location: str) -> bool:
    if not is_remote(location):
        return os.path.isfile(local_path(location))
    return bool(_io(location).exists(location))


def is_dir(location: str) -> bool:
    """Locally a directory; remotely a prefix under which at least one object lies."""
    if not is_remote(location):
        return os.path.isdir(local_path(location))
    return next(iter(_io(location).list_files(_prefix(location))), None) is not None


def exists(location: str) -> bool:
    return is_file(location) or is_dir(location)


def list_files(location: str) -> list[str]:
    """Every file below `location` (recursively), as full locations, sorted."""
    if not is_remote(location):
        root = local_path(location)
        found = [os.path.join(d, f) for d, _, files in os.walk(root) for f in files]
        return sorted(found)
    return sorted(path for path, _ in _io(location).list_files(_prefix(location)))


def list_names(location: str) -> list[str]:
    """The names directly below `location` (files and directories), sorted."""
    if not is_remote(location):
        path = local_path(location)
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    prefix = _prefix(location)
    return sorted({relative_to(path, prefix).split("/", 1)[0] for path in list_files(location)})


def size(location: str) -> int:
    if not is_remote(location):
        return os.path.getsize(local_path(location))
    try:
        return int(_io(location).size(location))
    except Exception as error:  # as in open_read: a missing object is FileNotFoundError on every scheme
        if _is_missing(error):
            raise FileNotFoundError(f"no such object: {location}") from None
        raise


def remove(location: str) -> None:
    """Removes a file or a whole tree (remotely: the object and every object below the prefix)."""
    if not is_remote(location):
        path = local_path(location)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        elif os.path.lexists(path):
            os.unlink(path)
        return
    doomed = list_files(location) + ([location] if is_file(location) else [])
    client = _io(location)
    for start in range(0, len(doomed), 1000):  # the object stores' batch-delete limit
        batch = doomed[start:start + 1000]
        results = client.delete_files(batch) if scheme(location) == "s3" else _delete_gs(client, batch)
        failed = [(path, err) for path, err in results if err is not None and not _is_missing(err)]
        if failed:
            raise OSError(f"could not delete {len(failed)} objects, e.g. {failed[0][0]}: {failed[0][1]}")


def _delete_gs(client: Any, paths: list[str]) -> list[tuple[str, Exception | None]]:
    """GCS's batch delete; one request per object under an emulator (fake-gcs-server answers the
    JSON batch API with an empty multipart body, which the client library refuses)."""
    if not os.environ.get("STORAGE_EMULATOR_HOST"):
        return client.delete_batch(paths)
    results: list[tuple[str, Exception | None]] = []
    for path in paths:
        try:
            client.delete(path)
            results.append((path, None))
        except Exception as error:  # reported as the batch reports it
            results.append((path, error))
    return results


def makedirs(location: str) -> None:
    """Creates a local directory; object stores have no directories, so nothing to do there."""
    if not is_remote(location):
        os.makedirs(local_path(location), exist_ok=True)


def copy_file(source: str, target: str) -> None:
    """Copies one file; the target appears whole."""
    with open_read(source) as reader, open_write(target) as writer:
        shutil.copyfileobj(reader, writer, 1 << 20)


def copy_tree(source: str, target: str) -> None:
    """Copies every file below `source` to the same relative place below `target`."""
    for path in list_files(source):
        rel = relative_to(path if is_remote(path) else path.replace(os.sep, "/"),
                          source if is_remote(source) else local_path(source).replace(os.sep, "/"))
        copy_file(path, join(target, *rel.split("/")))


def move(source: str, target: str) -> None:
    """Locally an atomic rename (file or directory); remotely a copy of every object, then a delete."""
    if not is_remote(source) and not is_remote(target):
        os.makedirs(os.path.dirname(local_path(target)) or ".", exist_ok=True)
        os.replace(local_path(source), local_path(target))
        return
    if is_file(source):
        copy_file(source, target)
    else:
        copy_tree(source, target)
    remove(source)
