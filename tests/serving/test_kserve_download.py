"""KServe loads exactly the pointed version: KServe's own storage initializer (`kserve_storage.Storage.download`)
on CURRENT.json's `storage_uri`, locally, on S3 (moto) and on GCS (fake-gcs-server), then TF Serving's version
rule on the download (kserve_download.py).

- While three pusher processes race (each trial's models gated against the same served one), a downloader
  downloads whatever the pointer names, again and again: every download holds one integer folder, the pointer's
  version, byte-identical to the model pushed, at most 1.05x its bytes (it is 1.00x: nothing else is there).
- A push SIGKILLed at every stage (tests/push_killed.py): the pointer's storage_uri still downloads exactly the
  pointer's version; a copy killed before it was whole is not loadable under its own prefix (locally that does
  not exist, on a bucket it has no saved_model.pb); the next push removes the orphan and is downloaded whole.
- Why not a bare number: KServe lists an S3 storageUri by string prefix, so `SERVING/1` also downloads
  `SERVING/10/…` (shown on moto), and TF Serving would load the highest integer folder of the mix.
"""
from __future__ import annotations

import multiprocessing
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kserve_download import Download, kserve_download
from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.pusher import read_pointer
from shardflow.pusher.layout import model_location, storage_uri
from testkit.serving_oracle import candidate, pusher, race_trials

KILLER = Path(__file__).parents[1] / "push_killed.py"
STAGES = ("claimed", "mid-copy", "copied", "swapped")
TRIALS = 4
PUSHERS = ("a", "b", "c")
BUDGET = 1.05  # the download at most this many times the version's own bytes


@pytest.fixture(params=[pytest.param("local", marks=pytest.mark.pipeline),  # subprocesses: not the unit tier
                        pytest.param("s3", marks=pytest.mark.cluster), pytest.param("gs", marks=pytest.mark.cluster)])
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    if request.param == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}/root"
    return f"gs://{request.getfixturevalue('gcs_server').bucket()}/root"


def _tree(location: str) -> dict[str, bytes]:
    return {relative: storage.read_bytes(storage.join(location, *relative.split("/")))
            for relative in storage.list_relative(location)}


def check_download(serving: str, pointer: dict, out: Path) -> Download:
    """KServe's download of `pointer`'s storage_uri is exactly its version: one integer folder, the model pushed."""
    assert pointer["storage_uri"] == storage_uri(serving, pointer["version"])
    found = kserve_download(pointer["storage_uri"], out)
    version = pointer["version"]
    assert (found.integer_folders, found.version) == ([version], version), (pointer, sorted(found.files))
    pushed = _tree(pointer["pushed_from"])
    assert found.version_files(version) == pushed and set(found.files) == {f"{version}/{n}" for n in pushed}
    assert found.bytes <= BUDGET * sum(len(data) for data in _tree(model_location(serving, version)).values())
    return found


def _downloads(serving: str, out: Path, stop: threading.Event, seen: list, errors: list) -> None:
    """Downloads what the pointer names until `stop`, checking each; (version, bytes) of each on `seen`."""
    while not stop.is_set():
        pointer = read_pointer(serving)
        if pointer is None:
            time.sleep(0.05)
            continue
        try:
            found = check_download(serving, pointer, out / str(len(seen)))
            seen.append((pointer["version"], found.bytes))
        except BaseException as error:  # noqa: BLE001 (re-raised by the test)
            errors.append(error)
            return


def test_racing_pushes_never_make_kserve_download_anything_but_the_pointed_version(root: str, tmp_path: Path) -> None:
    serving = storage.join(root, "serving")
    context = multiprocessing.get_context("spawn")
    results, queues = context.Queue(), {name: context.Queue() for name in PUSHERS}
    workers = [context.Process(target=pusher, args=(name, serving, tasks, results), daemon=True)
               for name, tasks in queues.items()]
    stop, seen, errors = threading.Event(), [], []
    downloader = threading.Thread(target=_downloads, args=(serving, tmp_path / "mnt", stop, seen, errors))
    for process in workers:
        process.start()
    try:
        assert sorted(results.get(timeout=120) for _ in workers) == sorted(("ready", name) for name in PUSHERS)
        downloader.start()
        winners = race_trials(root, serving, queues, results, TRIALS, 0.3)  # three pushes gated alike: one wins each
    finally:
        stop.set()
        for name, process in zip(queues, workers):
            queues[name].put(None)
            process.join(timeout=30)
        if downloader.is_alive():
            downloader.join(timeout=180)
    assert not errors, errors[0]
    assert len(winners) == TRIALS and {version for version, _ in seen} <= {version for version, _ in winners}
    assert seen, "no download ran during the race"
    check_download(serving, read_pointer(serving), tmp_path / "last")  # the last winner, whole


def test_a_push_killed_at_any_stage_leaves_kserve_downloading_the_pointed_version(root: str, tmp_path: Path) -> None:
    serving = storage.join(root, "serving")
    model, evaluation = candidate(root, "base", "none")
    assert shardflow_main(_argv(model, evaluation, serving)) == 0
    for stage in STAGES:
        before = read_pointer(serving)
        model, evaluation = candidate(root, f"killed-{stage}", before["model"])
        killed = subprocess.run([sys.executable, str(KILLER), stage, "--", *_argv(model, evaluation, serving)],
                                capture_output=True, text=True, timeout=120)
        assert killed.returncode == -9, (stage, killed.stderr[-2000:])
        pointer = read_pointer(serving)
        assert pointer["version"] == before["version"] + (1 if stage == "swapped" else 0)  # only a swap moved it
        check_download(serving, pointer, tmp_path / stage)
        orphan = storage_uri(serving, before["version"] + 1)  # the killed push's own prefix, named by no pointer
        if stage in ("claimed", "mid-copy") and storage.is_dir(orphan):  # locally absent; on a bucket, not loadable
            assert kserve_download(orphan, tmp_path / f"{stage}-orphan").version is None
        model, evaluation = candidate(root, f"after-{stage}", pointer["model"])
        assert shardflow_main(_argv(model, evaluation, serving)) == 0  # in this process: it cleans up, then pushes
        check_download(serving, read_pointer(serving), tmp_path / f"after-{stage}")
        assert stage == "swapped" or not storage.is_dir(orphan)  # the next push's clean-up removed it


def _argv(model: str, evaluation: str, serving: str) -> list[str]:
    return ["push", "--model", model, "--evaluation", evaluation, "--serving-dir", serving]


@pytest.mark.cluster
def test_a_bare_version_number_as_storage_uri_would_download_its_longer_namesakes(s3_server, tmp_path: Path) -> None:
    """KServe lists `s3://b/serving/1` by the prefix `serving/1`: version 10's files come along (as `0/10/…`), so
    the layout's storage URI ends in `<N>/model`, which no other version's keys start with."""
    bucket, client = s3_server.bucket(), s3_server.client()
    for key in ("bare/1/1/saved_model.pb", "bare/10/10/saved_model.pb", "serving/1/model/1/saved_model.pb",
                "serving/10/model/10/saved_model.pb"):
        client.put_object(Bucket=bucket, Key=key, Body=key.encode())
    bare = kserve_download(f"s3://{bucket}/bare/1", tmp_path / "bare")  # the <N>/<N> layout, a bare number
    assert sorted(bare.files) == ["0/10/saved_model.pb", "1/saved_model.pb"] and bare.integer_folders == [0, 1]
    named = kserve_download(f"s3://{bucket}/serving/1/model", tmp_path / "named")
    assert named.files == {"1/saved_model.pb": b"serving/1/model/1/saved_model.pb"} and named.version == 1
