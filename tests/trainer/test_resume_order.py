"""A resume proves it continues the same order, the record order says what was trained, and a kill in the
export resumes there: real `shardflow train` processes and SIGKILL on the digits.

Every run trains folds 0 and 2 of 3 (`InputOptions.train_folds`, which has no flag: `_TRAIN` sets it in
the command's own entry point), global batches of 32, a 0.4 MB shuffle window (481 records, less than
a pass) and a budget of 50 steps that ends inside epoch 2 (30 steps an epoch):

- the uninterrupted run: the reference weights and record order;
- a run SIGKILLed while it exports: its stream record holds the budget's step (not its epoch's end);
  rerun with half the shuffle window, another seed or other folds, or without its stream record, it is
  refused in one line, exit 2, and nothing changes; rerun as it was, it does not train again and ends
  with the reference's weights and record order;
- two workers SIGKILLed right after their first checkpoint, resumed on one: each of the 50 steps has
  the reference's 32 examples, no more (the second worker read ahead, and those steps were not trained).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers_models import free_ports
from helpers_processes import recorded_checkpoint, wait_for
from shardflow.trainer.record_order import read_order

pytestmark = pytest.mark.pipeline

STEPS, GLOBAL_BATCH = 50, 32
# `shardflow train` whose config also trains only the folds named by $TRAIN_FOLDS ("count:held_out").
_TRAIN = """
import os, sys
from shardflow.cli import console_main
from shardflow.core.folds import FoldSelection
from shardflow.trainer import cli
count, held_out = map(int, os.environ["TRAIN_FOLDS"].split(":"))
given = cli.config_from_args
cli.config_from_args = lambda args, extra: given(args, extra).replaced(
    train_folds=FoldSelection.training(count, held_out))
console_main()
"""


def _command(examples: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-c", _TRAIN, "train", "--examples", str(examples), "--output", str(out),
            "--deterministic", "--seed", "0", "--eval-split", "", "--input-probe-batches", "1",
            "--shuffle-buffer-mb", "0.4", "--steps", str(STEPS), "--checkpoint-every", "5",
            "--batch-size", str(GLOBAL_BATCH),
            "--record-order", str(out.parent / f"{out.name}.order.jsonl"), *extra]


def _env(folds: str = "3:1", **extra: str) -> dict[str, str]:
    return {**os.environ, "TRAIN_FOLDS": folds, **extra}


def _finish(command: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def _summary(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


def trained_steps(order_file: Path) -> dict[int, list[tuple[int, int, int]]]:
    """{step: [(position in the global batch, shard, record)]}: every worker's slice of the steps `read_order`
    says were trained."""
    steps: dict[int, list[tuple[int, int, int]]] = {}
    for (step, _), examples in read_order(str(order_file)).items():
        steps.setdefault(step, []).extend((place, shard, record) for shard, record, place, *_ in examples)
    return {step: sorted(examples) for step, examples in sorted(steps.items())}


@pytest.fixture(scope="module")
def reference(digits_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("order") / "whole"
    _finish(_command(digits_examples, out), _env())
    return out


@pytest.fixture(scope="module")
def killed_in_export(digits_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run SIGKILLed once its export has begun (the staged model's folder exists), and an untouched copy."""
    out = tmp_path_factory.mktemp("export") / "killed"
    process = subprocess.Popen(_command(digits_examples, out), env=_env(), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    wait_for(lambda: (out / ".staging" / "model").is_dir(), process, 600, "the export")
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert not (out / "training.json").exists(), "the run finished before it could be killed"
    copy = out.parent / "copy"
    shutil.copytree(out, copy)
    return out, copy


def test_a_step_budget_s_stop_records_its_own_step(killed_in_export: tuple[Path, Path]) -> None:
    record = json.loads((killed_in_export[1] / "checkpoints" / "stream.json").read_text())
    assert (record["steps_per_epoch"], record["step"]) == (30, STEPS)  # not 60, the end of the epoch it stopped in
    assert record["folds"] == {"count": 3, "folds": [0, 2], "seed": 0} and record["window"] == 481


@pytest.mark.parametrize("change, env, named", [
    (("--shuffle-buffer-mb", "0.2"), {}, "--shuffle-buffer-mb was 0.4 (a shuffle window of 481 records), "
                                         "is 0.2 now (240 records)"),
    (("--seed", "1"), {}, "--seed was 0, is 1 now"),
    ((), {"folds": "3:2"}, "the train folds were 0,2 of 3 (seed 0), are 0,1 of 3 (seed 0) now"),
], ids=["half-the-shuffle-window", "another-seed", "other-folds"])
def test_a_resume_in_another_order_is_refused_in_one_line(digits_examples: Path, killed_in_export: tuple[Path, Path],
                                                          tmp_path: Path, change: tuple[str, ...], env: dict,
                                                          named: str) -> None:
    out = tmp_path / "killed"
    shutil.copytree(killed_in_export[1], out)
    before = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    done = subprocess.run(_command(digits_examples, out, *change), env=_env(**env), capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"shardflow train: error: the backup in {out / 'checkpoints'} trained in "
                                        f"another order: {named}; rerun with the backup's values, or remove "
                                        f"{out / 'checkpoints'} to train anew"]
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == before


def test_a_backup_without_its_stream_record_is_refused(digits_examples: Path, killed_in_export: tuple[Path, Path],
                                                       tmp_path: Path) -> None:
    out = tmp_path / "killed"
    shutil.copytree(killed_in_export[1], out)
    (out / "checkpoints" / "stream.json").unlink()  # as if its upload had failed: the order is not guessed
    done = subprocess.run(_command(digits_examples, out), env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.splitlines() == [f"shardflow train: error: {out / 'checkpoints'} holds a backup without its "
                                        f"stream record (stream.json), so the order it trained in is unknown: remove "
                                        f"{out / 'checkpoints'} to train anew"]


@pytest.mark.unit
def test_read_order_keeps_what_each_step_trained(tmp_path: Path) -> None:
    """2 workers from step 0 (worker 1 read ahead to step 6), resumed at 5 on 1 worker (which reread step 5 and
    read ahead to 9), killed and resumed at 5 again on 1 worker, ended at 8."""
    def step(number: int, worker: int, count: int) -> dict:
        examples = [[worker, number, place, -1, -1] for place in range(count)]
        return {"step": number, "worker": worker, "examples": examples}

    chief = [{"split": "train"}, {"start": 0, "workers": 2}, *(step(n, 0, 2) for n in range(6)),
             {"start": 5, "workers": 1}, *(step(n, 0, 4) for n in range(5, 10)),
             {"start": 5, "workers": 1}, *(step(n, 0, 4) for n in range(5, 10)), {"end": 8}]
    (tmp_path / "order.jsonl").write_text("".join(json.dumps(line) + "\n" for line in chief))
    worker = [{"split": "train"}, *(step(n, 1, 2) for n in range(7))]
    (tmp_path / "order.jsonl.worker-1").write_text("".join(json.dumps(line) + "\n" for line in worker))
    order = read_order(str(tmp_path / "order.jsonl"))
    assert sorted(order) == sorted([(n, 0) for n in range(8)] + [(n, 1) for n in range(5)])
    assert [len(order[(n, 0)]) for n in range(8)] == [2] * 5 + [4] * 3


def test_a_run_killed_in_its_export_exports_without_training_again(digits_examples: Path, reference: Path,
                                                                   killed_in_export: tuple[Path, Path]) -> None:
    out = killed_in_export[0]
    log = _finish(_command(digits_examples, out), _env())
    summary = _summary(out)
    assert "nothing left to train" in log
    assert summary["optimizer_steps"] == summary["resumed_from_step"] == STEPS
    assert summary["weights_sha256"] == _summary(reference)["weights_sha256"]
    assert trained_steps(out.parent / "killed.order.jsonl") == trained_steps(reference.parent / "whole.order.jsonl")
    assert not (out / "checkpoints").exists()


def test_two_workers_killed_after_their_first_checkpoint_resume_on_one_with_the_same_examples(
        digits_examples: Path, reference: Path, tmp_path: Path) -> None:
    out = tmp_path / "elastic"
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    command = _command(digits_examples, out)
    workers = [subprocess.Popen(command + ["--batch-size", "16"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                env=_env(TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker",
                                                                                            "index": i}})))
               for i in range(2)]
    wait_for(lambda: recorded_checkpoint(str(out / "checkpoints")) >= 1, workers[0], 600, "the first checkpoint")
    for worker in workers:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    assert (tmp_path / "elastic.order.jsonl.worker-1").is_file()
    log = _finish(command + ["--batch-size", "64"], _env())  # the last --batch-size; overruled by the run's
    assert f"resuming with the run's global batch of {GLOBAL_BATCH}" in log
    assert 0 < _summary(out)["resumed_from_step"] < STEPS
    trained = trained_steps(tmp_path / "elastic.order.jsonl")
    assert list(trained) == list(range(STEPS))
    assert all([place for place, *_ in examples] == list(range(GLOBAL_BATCH)) for examples in trained.values())
    assert trained == trained_steps(reference.parent / "whole.order.jsonl")
