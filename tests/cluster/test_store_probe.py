"""The store is checked, not trusted: before the first conditional write to a bucket, each process probes that the
store refuses what a compare-and-swap needs refused (a second create-if-absent, a replace with a wrong token, a
replace of a removed object), against real servers: moto (S3) and fake-gcs-server (GCS) refuse all three; moto
behind a filter that drops If-Match / If-None-Match (tests/moto_serialized.py --ignore) is a store that does
not, and no conditional write reaches it."""
from __future__ import annotations

import concurrent.futures
import threading
from typing import Any, Callable, Iterator

import pytest

from s3_server import S3Server
from shardflow.core import storage
from shardflow.core.errors import ShardflowError
from shardflow.core.filesystems import backend_of_scheme
from shardflow.core.filesystems.object_store import PROBE_DIR

PROBE_WRITES = 4  # the probe object's create, then the three writes the store must refuse
THREADS = 8


@pytest.fixture(params=["s3", "gs"])
def store(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """A scheme and its server (S3Server or GcsServer), the storage layer pointed at it."""
    return request.param, request.getfixturevalue("s3_server" if request.param == "s3" else "gcs_server")


@pytest.fixture
def aim(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[S3Server], None]]:
    """Points the AWS variables, and a new s3:// client, at another S3 server for this test only."""
    def aim_at(server: S3Server) -> None:
        for name, value in server.env.items():
            monkeypatch.setenv(name, value)
        storage.forget_clients()

    yield aim_at
    storage.forget_clients()  # the next test's client is made from its own variables


def probe_writes(monkeypatch: pytest.MonkeyPatch, scheme: str) -> list[str]:
    """The locations of the probes' conditional writes from now on in this test (the real requests, recorded)."""
    backend, seen = backend_of_scheme(scheme), []
    put_if = backend.put_if

    def recorded(location: str, data: bytes, expected: str | None) -> str:
        if f"/{PROBE_DIR}/" in location:
            seen.append(location)
        return put_if(location, data, expected)

    monkeypatch.setattr(backend, "put_if", recorded)
    return seen


def test_a_bucket_is_probed_once_per_process_and_keeps_no_probe_object(store: tuple[str, Any],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    scheme, server = store
    bucket, writes = server.bucket(), probe_writes(monkeypatch, scheme)
    pointer = f"{scheme}://{bucket}/serving/CURRENT.json"
    storage.check_conditional_writes(pointer)
    assert len(writes) == PROBE_WRITES and {storage.parent(w) for w in writes} == {
        f"{scheme}://{bucket}/serving/{PROBE_DIR}"}  # beside the file: where its writer may write
    first = storage.write_if(pointer, b"one", None)
    second = storage.write_if(pointer, b"two", first)
    with pytest.raises(storage.WriteConflict):
        storage.write_if(pointer, b"three", first)
    assert storage.read_with_token(pointer) == (b"two", second)
    storage.check_conditional_writes(f"{scheme}://{bucket}/elsewhere/x")
    assert len(writes) == PROBE_WRITES  # the bucket passed: not probed again
    assert server.keys(bucket) == ["serving/CURRENT.json"]
    storage.write_if(f"{scheme}://{server.bucket()}/x", b"x", None)
    assert len(writes) == 2 * PROBE_WRITES  # another bucket: probed on its first conditional write


def test_threads_writing_at_once_to_a_new_bucket_share_one_probe(store: tuple[str, Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    scheme, server = store
    bucket, writes = server.bucket(), probe_writes(monkeypatch, scheme)
    start = threading.Barrier(THREADS)

    def claim(index: int) -> str:
        start.wait()
        return storage.write_if(f"{scheme}://{bucket}/claims/{index}", f"claim {index}".encode(), None)

    with concurrent.futures.ThreadPoolExecutor(THREADS) as pool:
        tokens = list(pool.map(claim, range(THREADS)))  # a thread's error is raised here
    assert len(tokens) == THREADS and len(writes) == PROBE_WRITES
    assert server.keys(bucket) == sorted(f"claims/{i}" for i in range(THREADS))


def test_the_unconditional_server_really_is_last_writer_wins(s3_unconditional_server: S3Server,
                                                             aim: Callable[[S3Server], None]) -> None:
    """What the probe guards against, shown without it: two creates-if-absent both succeed."""
    aim(s3_unconditional_server)
    location, backend = f"s3://{s3_unconditional_server.bucket()}/CURRENT.json", backend_of_scheme("s3")
    backend.put_if(location, b"first", None)
    backend.put_if(location, b"second", None)
    assert storage.read_bytes(location) == b"second"


@pytest.mark.parametrize("server, accepted", [
    ("s3_unconditional_server", "a second PUT with If-None-Match: *"),
    ("s3_replace_unchecked_server", "a PUT with If-Match: a made-up ETag")])
def test_a_store_that_ignores_a_condition_is_refused_and_nothing_is_written(
        server: str, accepted: str, request: pytest.FixtureRequest, aim: Callable[[S3Server], None]) -> None:
    lax: S3Server = request.getfixturevalue(server)
    aim(lax)
    bucket = lax.bucket()
    line = f"s3://{bucket} does not enforce conditional writes ({accepted} was accepted): "
    for _ in range(2):  # a failed probe is not remembered as a pass: refused every time
        with pytest.raises(storage.UnsafeStoreError) as raised:
            storage.write_if(f"s3://{bucket}/serving/CURRENT.json", b'{"version": 1}', None)
        assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
    assert isinstance(raised.value, ShardflowError) and raised.value.exit_code == 2
    with pytest.raises(storage.UnsafeStoreError, match="last-writer-wins"):
        storage.check_conditional_writes(f"s3://{bucket}/x")
    assert lax.keys(bucket) == []  # neither the file nor a probe object
