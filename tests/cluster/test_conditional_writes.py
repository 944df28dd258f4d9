"""`storage.read_with_token` / `storage.write_if`, the compare-and-swap Push moves CURRENT.json with, on each
scheme's own backend against a real server: a local disk (an exclusive-create lock file held for the compare and the write), S3
(moto: a PUT with `If-None-Match: *` or `If-Match: ETAG`) and GCS (fake-gcs-server: `ifGenerationMatch`, 0
for "must not exist"). Each server is asked to refuse, not trusted to: a stale token, a create over an
existing file and a replace of a removed one must each leave the file as it was."""
from __future__ import annotations

import threading

import pytest

from shardflow.core import storage

CONTENDERS, ROUNDS = 6, 4


@pytest.fixture(params=["local", "s3", "gs"])
def root(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    if request.param == "local":
        return str(tmp_path / "root")
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}/root"
    return f"gs://{request.getfixturevalue('gcs_server').bucket()}/root"


def test_a_create_happens_only_where_nothing_is(root: str) -> None:
    pointer = storage.join(root, "serving", "CURRENT.json")
    assert storage.read_with_token(pointer) == (None, None)
    token = storage.write_if(pointer, b'{"version": 1}', None)
    assert storage.read_with_token(pointer) == (b'{"version": 1}', token)
    with pytest.raises(storage.WriteConflict, match="was created by another writer"):
        storage.write_if(pointer, b'{"version": 2}', None)
    assert storage.read_bytes(pointer) == b'{"version": 1}'


def test_a_replace_happens_only_over_the_version_read(root: str) -> None:
    pointer = storage.join(root, "CURRENT.json")
    first = storage.write_if(pointer, b"one", None)
    second = storage.write_if(pointer, b"two", first)
    assert second != first and storage.read_with_token(pointer) == (b"two", second)
    with pytest.raises(storage.WriteConflict, match="was replaced or removed by another writer"):
        storage.write_if(pointer, b"three", first)  # a stale token: someone wrote since it was read
    assert storage.read_with_token(pointer) == (b"two", second)
    gone = storage.join(root, "removed.json")
    token = storage.write_if(gone, b"x", None)
    storage.remove(gone)
    with pytest.raises(storage.WriteConflict):
        storage.write_if(gone, b"y", token)  # replacing a file that is no longer there
    assert not storage.exists(gone)


def test_a_write_that_already_landed_is_its_own_not_a_conflict(root: str) -> None:
    """A client that retries a create after the first attempt landed finds its own bytes: success, same token."""
    claim = storage.join(root, ".claims", "7")
    token = storage.write_if(claim, b'{"claim": "abc"}', None)
    assert storage.write_if(claim, b'{"claim": "abc"}', None) == token
    with pytest.raises(storage.WriteConflict):
        storage.write_if(claim, b'{"claim": "other"}', None)


def test_of_racing_writers_with_the_same_token_exactly_one_wins(root: str) -> None:
    """CONTENDERS threads read the same version, wait for each other, then all write over it: one wins, and the
    file holds the winner's bytes; a round's winner's token is the next round's (ROUNDS rounds)."""
    pointer = storage.join(root, "CURRENT.json")
    token = storage.write_if(pointer, b"round 0", None)
    for round_ in range(1, ROUNDS + 1):
        start, winners, failures = threading.Barrier(CONTENDERS), [], []

        def contend(index: int, expected: str | None = token, round_: int = round_) -> None:
            data = f"round {round_} by {index}".encode()
            start.wait()
            try:
                winners.append((data, storage.write_if(pointer, data, expected)))
            except storage.WriteConflict:
                pass
            except Exception as error:  # noqa: BLE001 (reported below, not lost in the thread)
                failures.append(error)

        threads = [threading.Thread(target=contend, args=(i,)) for i in range(CONTENDERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == [] and len(winners) == 1, (round_, winners, failures)
        (data, token), = winners
        assert storage.read_with_token(pointer) == (data, token)
