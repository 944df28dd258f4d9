"""What s3:// and gs:// share: a bucket reached through one of Apache Beam's object-store clients.

Beam's own clients (`S3IO`, `GcsIO`) are the code Dataflow, Flink and Dask workers use. One client
is kept per scheme and process (the backend instance holds it): Beam's `FileSystems` builds a new
boto3 session per call (~180 ms measured here, against ~8 ms per read with a kept client).

A write is one object that appears when its upload completes (object stores have no partial
objects); a failed upload is abandoned, never completed.

A conditional write (`write_if`) is the store's own precondition, which some stores ignore (older MinIO,
"S3-compatible" gateways, active-active replication): a compare-and-swap there is last-writer-wins. So the
first conditional write to a bucket, in each process, first probes it (`check_conditional_writes`).

>>> print(unsafe_message("s3://lake", "a second PUT with If-None-Match: *"))  # doctest: +ELLIPSIS
s3://lake does not enforce conditional writes (a second PUT with If-None-Match: * was accepted): ...
"""
from __future__ import annotations

import abc
import contextlib
import functools
import io
import threading
import uuid
from typing import Any, BinaryIO, Iterator

from ..uri import join, parent, scheme, split_bucket
from .base import FileSystem, UnsafeStoreError, WriteConflict

DELETE_BATCH = 1000  # the object stores' batch-delete limit
PROBE_DIR = ".shardflow-probe"  # hidden, beside the first conditionally written file: where its writer may write


def _prefix(location: str) -> str:
    return location.rstrip("/") + "/"


def is_missing(error: Exception) -> bool:
    """Whether a client's error means "no such object" (Beam raises its clients' own errors)."""
    return getattr(error, "code", None) == 404 or type(error).__name__ == "NotFound"


def abandon(stream: BinaryIO) -> None:
    """Marks a failed upload's stream closed without completing it.

    Closing it normally would complete the upload and publish a partial object, and so would the
    garbage collector's close; the incomplete upload stays invisible (buckets expire those).
    """
    raw = getattr(stream, "raw", None)
    if isinstance(raw, io.RawIOBase):
        io.RawIOBase.close(raw)  # the base close: skips the uploader's finish


def unsafe_message(bucket: str, accepted: str) -> str:
    """The one line of an UnsafeStoreError: the bucket, what it accepted, what that means and what to do."""
    return (f"{bucket} does not enforce conditional writes ({accepted} was accepted): a compare-and-swap there "
            "(Push's move of CURRENT.json) would be last-writer-wins; use a store that refuses it with 412 "
            "Precondition Failed (AWS S3, GCS, a current MinIO) or serve from a volume")


class ObjectStoreFileSystem(FileSystem):
    """A bucket behind a Beam client with `open`, `exists`, `size` and `list_files`; no directories, no rename."""

    @abc.abstractmethod
    def make_client(self) -> Any:
        """Beam's client for this scheme, from the environment's settings (called once per instance)."""

    @abc.abstractmethod
    def delete_batch(self, paths: list[str]) -> list[tuple[str, Exception | None]]:
        """Deletes up to DELETE_BATCH objects: (path, error or None) for each."""

    # The probe's requests in the scheme's own words, for the error's line (a scheme with conditional writes sets them).
    PROBE_WORDS = {"create": "a create-if-absent over an existing object", "wrong": "a replace with a wrong token",
                   "removed": "a replace of a removed object"}

    def __init__(self) -> None:
        self._enforcing: set[str] = set()  # the buckets ("s3://name") whose probe passed in this process
        self._probe_lock = threading.Lock()

    @functools.cached_property
    def client(self) -> Any:
        return self.make_client()

    def put_if(self, location: str, data: bytes, expected: str | None) -> str:
        """The scheme's conditional write as the store does it, unchecked (`write_if` probes the store first)."""
        raise NotImplementedError(f"{type(self).__name__} has no conditional writes (read_with_token, write_if)")

    def wrong_token(self, token: str) -> str:
        """A token of the scheme's form that is not `token` (no version of the probe object has it)."""
        raise NotImplementedError(f"{type(self).__name__} has no conditional writes (read_with_token, write_if)")

    def write_if(self, location: str, data: bytes, expected: str | None) -> str:
        self.check_conditional_writes(location)
        return self.put_if(location, data, expected)

    def check_conditional_writes(self, location: str) -> None:
        """Probes `location`'s bucket once per process (UnsafeStoreError if the store accepts what it must refuse)."""
        bucket = f"{scheme(location)}://{split_bucket(location)[0]}"
        if bucket in self._enforcing:
            return
        with self._probe_lock:  # one probe per bucket, however many threads write at once
            if bucket in self._enforcing:
                return
            accepted = self.probe(location)
            if accepted is not None:  # not remembered: every later write is refused too, each after its own probe
                raise UnsafeStoreError(unsafe_message(bucket, accepted))
            self._enforcing.add(bucket)

    def probe(self, location: str) -> str | None:
        """Asks the store to refuse, on a new object of its own beside `location`: a second create-if-absent, a
        replace with a wrong token, and (once the object is removed) a replace with its last token. What the
        store accepted instead, in PROBE_WORDS; None if it refused all three. The object is removed either way."""
        probe = join(parent(location), PROBE_DIR, uuid.uuid4().hex)
        token = self.put_if(probe, b"shardflow probe", None)
        try:
            for step, expected in (("create", None), ("wrong", self.wrong_token(token))):
                if not self._refuses(probe, expected):
                    return self.PROBE_WORDS[step]
        finally:
            self.delete_all([probe])
        if not self._refuses(probe, token):  # MinIO accepted this one in 2025 (minio/minio#21526)
            self.delete_all([probe])
            return self.PROBE_WORDS["removed"]
        return None

    def _refuses(self, probe: str, expected: str | None) -> bool:
        try:
            self.put_if(probe, b"a write the store must refuse", expected)
        except WriteConflict:
            return True
        return False

    def read_bytes(self, location: str) -> bytes:
        try:
            return super().read_bytes(location)
        except Exception as error:  # an object removed between the open and the read: missing, as on every scheme
            if is_missing(error):
                raise FileNotFoundError(f"no such object: {location}") from None
            raise

    def open_read(self, location: str) -> BinaryIO:
        try:
            return self.client.open(location, "rb")
        except Exception as error:  # a missing object is FileNotFoundError on every scheme
            if is_missing(error):
                raise FileNotFoundError(f"no such object: {location}") from None
            raise

    @contextlib.contextmanager
    def open_write(self, location: str, durable: bool = False) -> Iterator[BinaryIO]:
        stream = self.client.open(location, "wb")
        try:
            yield stream
        except BaseException:
            abandon(stream)
            raise
        self.finish_upload(location, stream)

    def finish_upload(self, location: str, stream: BinaryIO) -> None:
        """Completes the upload: the object appears whole."""
        del location
        stream.close()

    def is_file(self, location: str) -> bool:
        return bool(self.client.exists(location))

    def is_dir(self, location: str) -> bool:
        return next(iter(self.client.list_files(_prefix(location))), None) is not None

    def list_files(self, location: str) -> list[str]:
        return sorted(path for path, _ in self.client.list_files(_prefix(location)))

    def size(self, location: str) -> int:
        try:
            return int(self.client.size(location))
        except Exception as error:  # as in open_read
            if is_missing(error):
                raise FileNotFoundError(f"no such object: {location}") from None
            raise

    def remove(self, location: str) -> None:
        self.delete_all(self.list_files(location) + ([location] if self.is_file(location) else []))

    def delete_all(self, paths: list[str]) -> None:
        """Deletes these objects, in batches; one already missing is not an error."""
        for start in range(0, len(paths), DELETE_BATCH):
            results = self.delete_batch(paths[start:start + DELETE_BATCH])
            failed = [(path, err) for path, err in results if err is not None and not is_missing(err)]
            if failed:
                raise OSError(f"could not delete {len(failed)} objects, e.g. {failed[0][0]}: {failed[0][1]}")
