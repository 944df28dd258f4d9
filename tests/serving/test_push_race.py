"""Two pushers racing into one serving directory, in separate processes, locally, on S3 (moto) and on GCS
(fake-gcs-server), while a third process reads TF Serving's model config as the server would.

Each of TRIALS trials gates two new models against what is served when it starts (as two `shardflow run`s
started together both evaluate against the same `latest`), then starts both pushes at random offsets. A
push may move CURRENT.json only over the baseline it was gated against, so exactly one of the two wins
and the other is refused with one line naming the winner; the winner's version is new (claimed, never
shared: its directory holds its own model's bytes), the loser leaves no version behind, and the served
versions strictly increase. What TF Serving would load is at every poll a whole copy of a winner: on a bucket
the loser's copy is in `<N>/` for the whole race, where a server polling the newest folder would load it.
The offsets only vary the interleaving: every assertion holds for any.
"""
from __future__ import annotations

import multiprocessing
import random
import time

import pytest

from shardflow.core import storage
from shardflow.pusher import read_pointer
from shardflow.pusher.layout import model_location
from testkit.serving_oracle import MODEL_FILES, SPREAD, candidate, poll_served, pusher

TRIALS = 10


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster),
                        pytest.param("gs", marks=pytest.mark.cluster)])  # the servers: cluster tier
def place(request: pytest.FixtureRequest, tmp_path) -> tuple[str, str]:  # noqa: ANN001
    if request.param == "local":
        return request.param, str(tmp_path / "root")
    if request.param == "s3":
        return request.param, f"s3://{request.getfixturevalue('s3_bucket')}/root"
    return request.param, f"gs://{request.getfixturevalue('gcs_server').bucket()}/root"


def _versions(serving: str) -> list[int]:
    return sorted(int(name) for name in storage.list_names(serving) if name.isdigit())


def _check_trial(serving: str, before: dict | None, outcomes: list[tuple], served: list[int]) -> None:
    won = [o for o in outcomes if o[2]]
    lost = [o for o in outcomes if not o[2]]
    assert len(won) == 1 and len(lost) == 1, outcomes  # both gated against `before`: only one may replace it
    (_, model, _, version, _), (_, _, _, _, reasons) = won[0], lost[0]
    pointer = read_pointer(serving)
    assert (pointer["version"], pointer["model"]) == (version, model_location(serving, version))
    assert pointer["replaced_version"] == (before["version"] if before else None)  # it replaced what it was gated on
    assert pointer["gated_against"] == (before["model"] if before else "none")
    assert not served or version > served[-1]  # strictly increasing
    assert reasons == [f"{pointer['model']} (version {version}) is served now, but the model was gated against "
                       f"{pointer['gated_against'] if before else 'none (nothing was served)'}: evaluate it against "
                       "the served model, then push (a rerun of the pipeline does both)"]
    copy = model_location(serving, version)
    for relative in MODEL_FILES:  # the version is the winner's alone: no other push wrote into it
        assert storage.read_text(storage.join(copy, *relative.split("/"))) == storage.read_text(
            storage.join(model, *relative.split("/")))
    assert _versions(serving) == served + [version]  # the refused push left no version behind


def _race(scheme: str, root: str, serving: str, queues: dict, results) -> list[tuple[int, str]]:  # noqa: ANN001
    """TRIALS trials of two pushes gated against what is served; the (version, tag) of each trial's winner."""
    rng, served, winners = random.Random(43), [], []
    for trial in range(TRIALS):
        before = read_pointer(serving)
        gated = before["model"] if before else "none"
        start = time.time() + 0.1
        for name, tasks in queues.items():
            model, evaluation = candidate(root, f"t{trial}-{name}", gated)
            tasks.put((model, evaluation, start + rng.uniform(0, SPREAD[scheme])))
        outcomes = [results.get(timeout=60) for _ in queues]
        _check_trial(serving, before, outcomes, served)
        served.append(read_pointer(serving)["version"])
        (winner,) = [o for o in outcomes if o[2]]
        winners.append((winner[3], f"t{trial}-{winner[0]}"))
    return winners


def test_racing_pushes_never_bypass_the_served_baseline_and_tf_serving_serves_only_winners(
        place: tuple[str, str]) -> None:
    """Besides the pushes, a third process reads the model config as TF Serving does, every few ms: every version
    it would have served is whole and is a trial's winner, in the order they won, ending on the pointer's."""
    scheme, root = place
    serving = storage.join(root, "serving")
    context = multiprocessing.get_context("spawn")  # no fork of a test process that may hold TensorFlow
    results, queues = context.Queue(), {name: context.Queue() for name in ("a", "b")}
    stop, found = context.Event(), context.Queue()
    workers = {name: context.Process(target=pusher, args=(name, serving, tasks, results), daemon=True)
               for name, tasks in queues.items()}
    poller = context.Process(target=poll_served, args=(serving, stop, found), daemon=True)
    for process in [*workers.values(), poller]:
        process.start()
    try:  # a worker that never answers fails a `get` on its timeout (queue.Empty), never hangs the suite
        assert found.get(timeout=120) == "ready"
        assert sorted(results.get(timeout=120) for _ in workers) == [("ready", "a"), ("ready", "b")]
        winners = _race(scheme, root, serving, queues, results)
        claims = [int(name) for name in storage.list_names(storage.join(serving, ".claims")) if name.isdigit()]
        assert len(claims) >= TRIALS  # every served version was claimed first (losers' claims are kept too)
        assert {version for version, _ in winners} <= set(claims)
        time.sleep(0.2)  # the poller sees the last winner
    finally:
        stop.set()
        for name, process in workers.items():
            queues[name].put(None)
        for process in [*workers.values(), poller]:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    observed = list(iter(lambda: found.get(timeout=30), "done"))
    assert [o for o in observed if o[0] == "incomplete"] == []  # never a half copy
    assert observed and set(observed) <= set(winners)  # never a loser, an orphan or a number without a push
    assert observed == sorted(observed) and observed[-1] == winners[-1]  # in the order they won, to the last
    assert all(process.exitcode == 0 for process in [*workers.values(), poller])
