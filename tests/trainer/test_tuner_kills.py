"""`shardflow tune` survives a kill at any moment, KerasTuner's own files included (components/tuner/state.py).

- A state an older version left empty (oracle.json and a trial.json): the rerun says so in one line,
  starts the search again, takes the trials trained to their end from their outputs, and completes.
- A trial whose trial.json was written but that oracle.json does not list yet (a kill between the
  two writes) is drawn again under the same id with the same values, not left RUNNING forever.
- Ten SIGKILLs of a real `shardflow tune` at random moments of its search, rerun after each: the
  search completes and no trial is trained twice (each trial's training.json is written once, and
  the runs' logs say "trained" at most once per trial).
"""
from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from helpers_processes import wait_for
from shardflow.cli import main

pytestmark = pytest.mark.pipeline

TRAIN_ARGS = "--batch-size 256 --input-probe-batches 1 --eval-split eval"  # 6 steps a trial: about 2.5 s
TRAINED = re.compile(r"^tune: trial (\S+): .*\(\d+ epochs, [\d.]+ s\)$", re.MULTILINE)  # not "taken from its output"


def _command(digits: Path, out: Path, trials: int) -> list[str]:
    return ["tune", "--examples", str(digits), "--output", str(out), "--max-trials", str(trials),
            "--trial-epochs", "1", "--space", "learning_rate=log:1e-4:1e-2", "--seed", "1", "--train-args", TRAIN_ARGS]


def _start(command: list[str], log: Path) -> subprocess.Popen:
    with log.open("w") as stream:  # unbuffered: a killed run's lines are in its log
        return subprocess.Popen([sys.executable, "-m", "shardflow", *command], stdout=stream,
                                stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _kill(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGKILL)
    process.wait()


def _trainings(out: Path) -> dict[str, tuple[int, int]]:
    """Each trained trial's training.json, by trial id: (inode, mtime); a retraining replaces it."""
    found = {}
    for path in out.glob("trials/*/training.json"):
        try:
            found[path.parent.name] = (path.stat().st_ino, path.stat().st_mtime_ns)
        except FileNotFoundError:  # removed by a retraining that just began: the callers' check then fails
            pass
    return found


def test_a_state_an_older_version_left_empty_is_started_again(digits_examples: Path, tmp_path: Path,
                                                              capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "tune"
    assert main(_command(digits_examples, out, 1)) == 0
    (out / "best_hyperparameters.json").unlink()  # now as a 2-trial search killed after trial 0 was recorded
    trained = _trainings(out)
    assert set(trained) == {"0"}
    for damaged in (out / "oracle" / "oracle.json", out / "oracle" / "trial_0" / "trial.json"):
        damaged.write_text("")  # what KerasTuner's own save left when a kill landed in it
    capsys.readouterr()
    assert main(_command(digits_examples, out, 2)) == 0
    said = capsys.readouterr()
    assert "Traceback" not in said.out + said.err
    assert [line for line in said.out.splitlines() if "empty or cut short" in line] == [
        f"tune: {out / 'oracle' / 'oracle.json'} is empty or cut short (killed while an earlier version wrote it): "
        "the search starts again; trials trained to the end are taken from their outputs, not trained again"]
    best = json.loads((out / "best_hyperparameters.json").read_text())
    assert sorted(t["trial"] for t in best["trials"]) == ["0", "1"]
    assert _trainings(out)["0"] == trained["0"]  # the same training.json: not trained again
    assert TRAINED.findall(said.out) == ["1"]  # trial 0 taken from its output


def test_a_trial_the_oracle_never_listed_is_drawn_again(tmp_path: Path) -> None:
    import keras_tuner as kt

    from shardflow.tuner.state import forget_unlisted, write_whole

    write_whole(kt)
    space = kt.HyperParameters()
    space.Float("learning_rate", 1e-4, 1e-2, sampling="log")

    def oracle() -> kt.Oracle:
        made = kt.oracles.RandomSearchOracle(kt.Objective("score", "max"), max_trials=4, seed=1,
                                             hyperparameters=space)
        made._set_project_dir(str(tmp_path), "oracle")
        return made

    killed = oracle()
    trial = killed.create_trial("tuner0")
    killed.update_trial(trial.trial_id, {"score": 0.5})
    trial.status = "COMPLETED"
    killed.end_trial(trial)
    listed = (tmp_path / "oracle" / "oracle.json").read_text()
    orphan = killed.create_trial("tuner0")  # writes trial_1/trial.json, then oracle.json
    (tmp_path / "oracle" / "oracle.json").write_text(listed)  # as if killed between the two
    rerun = oracle()
    rerun.reload()
    assert rerun.trials[orphan.trial_id].status == "RUNNING" and not rerun._retry_queue  # nobody would run it
    forget_unlisted(rerun)
    again = rerun.create_trial("tuner0")
    assert (again.trial_id, again.hyperparameters.values) == (orphan.trial_id, orphan.hyperparameters.values)


KILLS, TRIALS = 10, 6
# Where the kills land, in turn: anywhere in a run's first trial and the next one's start; in the
# oracle's first writes (the trial it hands out: a retry, or a new trial.json and oracle.json, then
# the trial's values); at a trial's end (the trial's score, its end, the next trial's start).
MOMENTS = ("anywhere", "trial start", "trial end")


def test_killed_ten_times_at_random_moments_completes_and_trains_no_trial_twice(
        digits_examples: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out, seed, seen, moments = tmp_path / "tune", time.time_ns(), {}, []
    rng, command = random.Random(seed), _command(digits_examples, out, TRIALS)
    for kill in range(KILLS):
        moments.append(_kill_at_random(command, out, tmp_path / f"run{kill}.log", MOMENTS[kill % 3], rng))
        trained = _trainings(out)
        assert {k: v for k, v in trained.items() if k in seen} == seen, f"retrained (seed {seed}): {moments}"
        seen.update(trained)
    logs = "".join((tmp_path / f"run{kill}.log").read_text() for kill in range(KILLS))
    assert "Traceback" not in logs, logs
    assert main(command) == 0
    best = json.loads((out / "best_hyperparameters.json").read_text())
    assert sorted(t["trial"] for t in best["trials"]) == [str(i) for i in range(TRIALS)]
    assert {k: v for k, v in _trainings(out).items() if k in seen} == seen, f"retrained (seed {seed}): {moments}"
    counted = TRAINED.findall(logs + capsys.readouterr().out)  # a run killed right after a training may not say so
    assert len(counted) == len(set(counted)), f"a trial trained twice (seed {seed}, kills: {moments}): {counted}"


def _kill_at_random(command: list[str], out: Path, log: Path, moment: str, rng: random.Random) -> str:
    """Starts a rerun and SIGKILLs it at a random `moment` of its search (MOMENTS); says where it landed.

    The offsets scale with the machine's speed: a run's first trial takes about as long as the run's
    start (TensorFlow's first graphs), so an offset is a fraction of the start. Never once one trial
    is left to train: the kill must find the search unfinished."""
    started = time.monotonic()
    process = _start(command, log)
    _wait(process, lambda: "tune: random search" in log.read_text(), log, "the search's first line")
    startup, before = time.monotonic() - started, len(_trainings(out))
    if moment == "trial end" and before <= TRIALS - 2:
        _wait(process, lambda: len(_trainings(out)) > before, log, "a trial's end")
    offset = rng.uniform(0.0, (1.5 if moment == "anywhere" else 0.1) * startup)
    deadline = time.monotonic() + offset
    _wait(process, lambda: time.monotonic() > deadline or len(_trainings(out)) >= TRIALS - 1, log, "the kill")
    _kill(process)
    return f"{moment} + {offset:.2f} s: {len(_trainings(out))} trained"


def _wait(process: subprocess.Popen, predicate: Callable[[], object], log: Path, what: str) -> None:
    try:
        wait_for(predicate, process, 300, what)
    except pytest.fail.Exception as failed:  # the run's own words
        pytest.fail(f"{failed}; its output:\n{log.read_text()[-4000:]}")
