"""Two pushers racing into one serving directory, in separate processes, locally and on S3 (moto).

Each of TRIALS trials gates two new models against what is served when it starts (as two `shardflow run`s
started together both evaluate against the same `latest`), then starts both pushes at random offsets. A
push may move CURRENT.json only over the baseline it was gated against, so exactly one of the two wins
and the other is refused with one line naming the winner; the winner's version is new (claimed, never
shared: its directory holds its own model's bytes), the loser leaves no version behind, and the served
versions strictly increase. The offsets only vary the interleaving: every assertion holds for any.
"""
from __future__ import annotations

import json
import multiprocessing
import random
import time
from typing import Any

import pytest

from shardflow.core import storage
from shardflow.pusher import PusherConfig, read_pointer
from shardflow.pusher import run as push

TRIALS = 10
SPREAD = {"local": 0.02, "s3": 0.25}  # seconds: about one push's length, so that the two overlap or not
MODEL_FILES = ("saved_model.pb", "variables/variables.index", "shardflow_model.json")


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster)])  # s3: the server, so cluster
def place(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str]:  # noqa: ANN001
    if request.param == "local":
        return request.param, str(tmp_path / "root")
    return request.param, f"s3://{request.getfixturevalue('s3_bucket')}/root"


def pusher(name: str, serving: str, tasks: Any, results: Any) -> None:
    """A worker process: one push per task (model, evaluation, start time), its outcome back on `results`."""
    storage.list_names(serving)  # the scheme's client made before the first start time, not within the race
    results.put(("ready", name))
    for model, evaluation, start_at in iter(tasks.get, None):
        time.sleep(max(0.0, start_at - time.time()))
        result = push(PusherConfig(model=model, evaluation=evaluation, serving_dir=serving), echo=lambda _: None)
        results.put((name, model, result.pushed, result.version, result.reasons))


def _candidate(root: str, trial: int, name: str, gated_against: str) -> tuple[str, str]:
    """A tiny exported model whose every file names it, and its blessing evaluation gated against `gated_against`."""
    model = storage.join(root, f"t{trial}-{name}", "model")
    for relative in MODEL_FILES:
        storage.write_text(storage.join(model, *relative.split("/")), f"{relative} of trial {trial}, pusher {name}")
    evaluation = storage.join(root, f"t{trial}-{name}", "eval")
    storage.write_text(storage.join(evaluation, "metrics.json"), json.dumps({"model": model,
                                                                            "gated_against": gated_against}))
    storage.write_text(storage.join(evaluation, "BLESSED"), "accuracy = 0.93 meets threshold accuracy>=0.9\n")
    return model, evaluation


def _versions(serving: str) -> list[int]:
    return sorted(int(name) for name in storage.list_names(serving) if name.isdigit())


def _check_trial(serving: str, before: dict | None, outcomes: list[tuple], served: list[int]) -> None:
    won = [o for o in outcomes if o[2]]
    lost = [o for o in outcomes if not o[2]]
    assert len(won) == 1 and len(lost) == 1, outcomes  # both gated against `before`: only one may replace it
    (_, model, _, version, _), (_, _, _, _, reasons) = won[0], lost[0]
    pointer = read_pointer(serving)
    assert (pointer["version"], pointer["model"]) == (version, storage.join(serving, str(version)))
    assert pointer["replaced_version"] == (before["version"] if before else None)  # it replaced what it was gated on
    assert pointer["gated_against"] == (before["model"] if before else "none")
    assert not served or version > served[-1]  # strictly increasing
    assert reasons == [f"{pointer['model']} (version {version}) is served now, but the model was gated against "
                       f"{pointer['gated_against'] if before else 'none (nothing was served)'}: evaluate it against "
                       "the served model, then push (a rerun of the pipeline does both)"]
    copy = storage.join(serving, str(version))
    for relative in MODEL_FILES:  # the version is the winner's alone: no other push wrote into it
        assert storage.read_text(storage.join(copy, *relative.split("/"))) == storage.read_text(
            storage.join(model, *relative.split("/")))
    assert _versions(serving) == served + [version]  # the refused push left no version behind


def test_racing_pushes_never_bypass_the_served_baseline(place: tuple[str, str]) -> None:
    scheme, root = place
    serving = storage.join(root, "serving")
    context = multiprocessing.get_context("spawn")  # no fork of a test process that may hold TensorFlow
    results, queues = context.Queue(), {name: context.Queue() for name in ("a", "b")}
    workers = {name: context.Process(target=pusher, args=(name, serving, tasks, results), daemon=True)
               for name, tasks in queues.items()}
    for process in workers.values():
        process.start()
    try:  # a worker that never answers fails a `get` on its timeout (queue.Empty), never hangs the suite
        assert sorted(results.get(timeout=120) for _ in workers) == [("ready", "a"), ("ready", "b")]
        rng, served = random.Random(43), []
        for trial in range(TRIALS):
            before = read_pointer(serving)
            gated = before["model"] if before else "none"
            start = time.time() + 0.1
            for name, tasks in queues.items():
                model, evaluation = _candidate(root, trial, name, gated)
                tasks.put((model, evaluation, start + rng.uniform(0, SPREAD[scheme])))
            outcomes = [results.get(timeout=60) for _ in workers]
            _check_trial(serving, before, outcomes, served)
            served.append(read_pointer(serving)["version"])
        claims = [int(name) for name in storage.list_names(storage.join(serving, ".claims")) if name.isdigit()]
        assert set(served) <= set(claims) and len(claims) >= TRIALS  # every served version was claimed first
    finally:
        for name, process in workers.items():
            queues[name].put(None)
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    assert all(process.exitcode == 0 for process in workers.values())

