"""A run SIGKILLed and resumed trains on the same samples as the uninterrupted run and ends with its weights.

`shardflow train --deterministic` is killed for real (SIGKILL) at three points (mid-epoch, at an
epoch's end, in the last epoch), resumed each time, and compared with an uninterrupted run: the same
weights digest, and the same examples at every step (`--record-order`). The same on 224-px JPEG
photos with `--augment flip,crop` (the fused crop at decode). With MultiWorkerMirroredStrategy, a
run killed on 2 workers and resumed on 1 (and 1 → 2) trains every step on the uninterrupted run's
examples, so its resumed pass sees every example exactly once; 3 workers, which cannot share its
global batch of 32, are refused in one line.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from helpers_models import free_ports, small_photo_examples
from helpers_processes import backed_up_step, wait_for
from shardflow.trainer.record_order import read_order

pytestmark = pytest.mark.pipeline


def _command(examples: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "shardflow", "train", "--examples", str(examples), "--output", str(out),
            "--deterministic", "--seed", "0", "--eval-split", "", "--input-probe-batches", "1",
            "--checkpoint-every", "1", "--record-order", str(out.parent / f"{out.name}.order.jsonl"), *extra]


def _kill_after(commands: list[tuple[list[str], dict]], out: Path, step: int) -> None:
    """Starts the processes, SIGKILLs them all once a backup at `step` or later is whole."""
    running = [subprocess.Popen(c, env=e, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for c, e in commands]
    wait_for(lambda: backed_up_step(out) >= step, running[0], 600, f"a backup at step {step}")
    for process in running:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert not (out / "training.json").exists(), "the run finished before it could be killed"


def _finish(commands: list[tuple[list[str], dict]]) -> list[str]:
    running = [subprocess.Popen(c, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
               for c, e in commands]
    logs = [p.communicate(timeout=900)[0] for p in running]
    assert [p.returncode for p in running] == [0] * len(running), "\n".join(log[-3000:] for log in logs)
    return logs


def _single(command: list[str]) -> list[tuple[list[str], dict]]:
    return [(command, dict(os.environ))]


def _workers(command: list[str], count: int, batch: int) -> list[tuple[list[str], dict]]:
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(count)]}
    return [(command + ["--batch-size", str(batch)],
             {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": i}})})
            for i in range(count)]


def steps_of(order_file: Path, total_steps: int) -> dict[int, list[list[int]]]:
    """{step: [(shard, record) of each position of the global batch]}, the workers' slices put together."""
    steps: dict[int, dict[int, list[int]]] = {}
    for (step, _), examples in read_order(str(order_file)).items():
        if step < total_steps:  # the stream reads ahead of training: later steps were read, not trained
            for shard, record, place, *_ in examples:
                steps.setdefault(step, {})[place] = [shard, record]
    return {step: [places[p] for p in sorted(places)] for step, places in steps.items()}


def _summary(out: Path) -> dict:
    return json.loads((out / "training.json").read_text())


@pytest.fixture(scope="module")
def digits_reference(digits_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The uninterrupted run: 2 epochs of global batches of 32 (the kills land in both)."""
    out = tmp_path_factory.mktemp("resume") / "whole"
    _finish(_single(_command(digits_examples, out, "--epochs", "2", "--batch-size", "32")))
    return out, _summary(out)


def test_killed_three_times_and_resumed_ends_with_the_uninterrupted_weights(digits_examples: Path, tmp_path: Path,
                                                                             digits_reference: tuple[Path, dict]) -> None:
    reference, whole = digits_reference
    per_epoch = whole["optimizer_steps"] // 2
    out = tmp_path / "killed"
    command = _command(digits_examples, out, "--epochs", "2", "--batch-size", "32")
    for step in (per_epoch // 2, per_epoch, per_epoch + per_epoch // 2):  # mid-epoch, an epoch's end, the last
        _kill_after(_single(command), out, step)
    logs = _finish(_single(command))
    summary = _summary(out)
    assert summary["resumed_from_step"] > per_epoch
    assert "records (~" in logs[0] and "read before the first resumed step" in logs[0]
    assert summary["weights_sha256"] == whole["weights_sha256"]
    total = whole["optimizer_steps"]
    assert steps_of(tmp_path / "killed.order.jsonl", total) == steps_of(reference.parent / "whole.order.jsonl", total)


@pytest.mark.parametrize("before, after", [(2, 1), (1, 2)])
def test_a_run_resumed_on_another_number_of_workers_trains_the_same_batches(
        digits_examples: Path, tmp_path: Path, digits_reference: tuple[Path, dict], before: int, after: int) -> None:
    reference, whole = digits_reference
    total, per_epoch = whole["optimizer_steps"], whole["optimizer_steps"] // 2
    out = tmp_path / "elastic"
    command = _command(digits_examples, out, "--epochs", "2")
    _kill_after(_workers(command, before, 32 // before), out, per_epoch + 7)
    logs = _finish(_workers(command, after, 64))  # --batch-size 64 is overruled: the run's global batch is kept
    assert "resuming with the run's global batch of 32" in logs[0]
    summary = _summary(out)
    assert summary["optimizer_steps"] == total and per_epoch < summary["resumed_from_step"] < total
    trained = steps_of(tmp_path / "elastic.order.jsonl", total)
    assert trained == steps_of(reference.parent / "whole.order.jsonl", total)  # every step, every example
    train_examples = json.loads((digits_examples / "manifest.json").read_text())["splits"]["train"]["num_examples"]
    positions = [tuple(example) for step in range(total) for example in trained[step]]
    resumed_pass = summary["resumed_from_step"] * 32 // train_examples
    seen = positions[resumed_pass * train_examples:(resumed_pass + 1) * train_examples]
    assert len(set(seen)) == len(seen) == train_examples  # the resumed pass: each example exactly once


def test_a_worker_count_that_cannot_share_the_global_batch_is_refused(digits_examples: Path, tmp_path: Path) -> None:
    out = tmp_path / "refused"
    command = _command(digits_examples, out, "--epochs", "3", "--batch-size", "32")
    _kill_after(_single(command), out, 5)
    third = _workers(command, 3, 32)[0]
    done = subprocess.run(third[0], env=third[1], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if "shardflow train: error" in line]
    assert lines == [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert "global batches of 32, which 3 replicas cannot share evenly" in lines[0]


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_photo_examples(tmp_path_factory.mktemp("photos"), rows=48, min_shards=3)


def test_photos_with_augmentation_resume_to_the_same_weights(photos: Path, tmp_path: Path) -> None:
    extra = ("--model", f"{photos.parent / 'small_model.py'}:small", "--epochs", "3", "--batch-size", "8",
             "--augment", "flip,crop", "--shuffle-buffer-mb", "0.25")  # a window of a quarter of the records
    whole = tmp_path / "whole"
    _finish(_single(_command(photos, whole, *extra)))
    out = tmp_path / "killed"
    command = _command(photos, out, *extra)
    for step in (3, 6, 15):  # mid-epoch 1, epoch 1's end, the last epoch (6 steps an epoch)
        _kill_after(_single(command), out, step)
    _finish(_single(command))
    assert _summary(out)["resumed_from_step"] > 12
    assert _summary(out)["weights_sha256"] == _summary(whole)["weights_sha256"]


def test_a_detector_killed_and_resumed_ends_with_the_uninterrupted_weights(box_examples: Path, tmp_path: Path) -> None:
    # Epoch 1 (240 images: 15 steps) and 7 steps of epoch 2: a kill mid-epoch 2 and a few steps left to resume.
    extra = ("--steps", "22", "--batch-size", "16", "--augment", "flip,crop", "--shuffle-buffer-mb", "0.5")
    whole = tmp_path / "whole"
    _finish(_single(_command(box_examples, whole, *extra)))
    out = tmp_path / "killed"
    command = _command(box_examples, out, *extra)
    _kill_after(_single(command), out, 18)  # mid-epoch 2
    _finish(_single(command))
    assert 15 < _summary(out)["resumed_from_step"] < 22
    assert _summary(out)["weights_sha256"] == _summary(whole)["weights_sha256"]
    total = _summary(whole)["optimizer_steps"]
    assert steps_of(tmp_path / "killed.order.jsonl", total) == steps_of(tmp_path / "whole.order.jsonl", total)
