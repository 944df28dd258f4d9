"""Trainer, Evaluator and Pusher with every input and output on a real S3 server (moto, loopback).

A tiny labelled set (8x8 gray PNGs whose class is their brightness band) goes through ExampleGen
straight to s3:// (2 train shards). Training then streams the shards from s3:// and writes
checkpoints, the SavedModel and its reports to s3:// from an empty working directory; a run killed
with SIGKILL resumes from its s3:// checkpoints; two MultiWorkerMirroredStrategy workers that share
nothing but the object store train together; the model is evaluated and pushed on s3://.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core import storage
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import read_model_info
from shardflow.core.reader import shard_files
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.pusher import PusherConfig, resolve_latest
from shardflow.pusher import run as push
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig
from shardflow.trainer import run as train
from shardflow.transform import TransformConfig
from shardflow.transform import run as transform

from helpers_images import write_csv, write_png
from helpers_models import free_ports
from helpers_processes import recorded_checkpoint, wait_for

TRAIN, EVAL, CLASSES = 48, 16, 3


@pytest.fixture(scope="module")
def bucket(s3_server) -> str:  # noqa: ANN001  (the session's S3Server)
    return s3_server.bucket()


@pytest.fixture(scope="module")
def s3_examples(tmp_path_factory: pytest.TempPathFactory, bucket: str) -> str:
    root, rng = tmp_path_factory.mktemp("bands"), np.random.default_rng(3)
    rows = []
    for i in range(TRAIN + EVAL):
        label = i % CLASSES
        pixels = rng.integers(0, 60, size=(8, 8, 1)) + 90 * label  # brightness band = class
        write_png(root / f"img/{i}.png", pixels.astype(np.uint8))
        rows.append([f"img/{i}.png", label])
    write_csv(root / "train.csv", ["image", "label"], rows[:TRAIN])
    write_csv(root / "eval.csv", ["image", "label"], rows[TRAIN:])
    output = f"s3://{bucket}/examples"
    indexes = tuple(IndexSpec(str(root / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(root), output=output, min_shards=2),
                echo=lambda _: None)
    return output


@pytest.fixture(scope="module")
def trained(s3_examples: str, bucket: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict, Path]:
    """One in-process training run on s3, from an empty working directory."""
    work = tmp_path_factory.mktemp("train_cwd")
    before = os.getcwd()
    os.chdir(work)
    try:
        output = f"s3://{bucket}/model"
        summary = train(TrainerConfig(input=InputOptions(examples=s3_examples, batch_size=8, shuffle_buffer_mb=0.5,
                                                         input_probe_batches=2),
                                      fit=FitOptions(steps=30, checkpoint_every=10),
                                      export=ExportOptions(output=output)), echo=lambda _: None)
    finally:
        os.chdir(before)
    return output, summary, work


def _keys(s3_server, uri: str) -> list[str]:  # noqa: ANN001
    bucket, _, prefix = uri[len("s3://"):].partition("/")
    return [k[len(prefix) + 1:] for k in s3_server.keys(bucket, prefix + "/")]


def _eval_records(examples: str) -> list[bytes]:
    files = shard_files(examples, read_manifest(examples), "eval")
    return [r.numpy() for r in tf.data.TFRecordDataset(files)]


def test_training_streams_from_s3_and_writes_everything_to_s3(trained: tuple[str, dict, Path], s3_examples: str,
                                                              s3_server) -> None:  # noqa: ANN001
    output, summary, work = trained
    assert summary["optimizer_steps"] == 30 and summary["model"] == f"{output}/model"
    assert list(work.iterdir()) == []  # nothing written to the working directory
    keys = _keys(s3_server, output)
    for name in ("training.json", "history.json", "curves.png", "input_report.json", "workers/worker-0.json",
                 "model/saved_model.pb", "model/shardflow_model.json", "model/variables/variables.index"):
        assert name in keys, (name, keys)
    assert not [k for k in keys if k.startswith(("checkpoints/", ".staging/")) or ".tmp-" in k]
    assert storage.read_json(f"{output}/training.json")["optimizer_steps"] == 30
    assert storage.read_bytes(f"{output}/curves.png")[:8] == b"\x89PNG\r\n\x1a\n"
    info = read_model_info(f"{output}/model")
    assert (info.task, info.label, info.num_classes, info.extra["examples"]) == ("classification", "label", 3,
                                                                                 s3_examples)


def test_exported_model_loads_from_s3_and_predicts(trained: tuple[str, dict, Path], s3_examples: str) -> None:
    output, _, _ = trained
    records = _eval_records(s3_examples)
    served = tf.saved_model.load(f"{output}/model").signatures["serving_default"](examples=tf.constant(records))
    probabilities = served["probabilities"].numpy()
    assert probabilities.shape == (EVAL, CLASSES)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, rtol=1e-5)
    np.testing.assert_array_equal(served["class_ids"].numpy(), probabilities.argmax(axis=1))


def test_transform_graph_on_s3_is_applied_in_training_and_inside_the_served_model(
        s3_examples: str, bucket: str, trained: tuple[str, dict, Path], empty_cwd: Path) -> None:
    graph_dir, output = f"s3://{bucket}/transform", f"s3://{bucket}/model_tft"
    transform(TransformConfig(examples=s3_examples, output=graph_dir), echo=lambda _: None)
    summary = train(TrainerConfig(input=InputOptions(examples=s3_examples, transform=graph_dir, batch_size=8,
                                                     input_probe_batches=1),
                                  model=ModelOptions(warm_start=f"{trained[0]}/model"), fit=FitOptions(steps=5),
                                  export=ExportOptions(output=output)), echo=lambda _: None)
    assert summary["optimizer_steps"] == 5 and summary["transform_graph"] == f"{graph_dir}/transform_graph"
    records = _eval_records(s3_examples)
    served = tf.saved_model.load(f"{output}/model").signatures["serving_default"](examples=tf.constant(records))
    assert served["probabilities"].shape == (EVAL, CLASSES)
    assert list(empty_cwd.iterdir()) == []


def test_evaluate_and_push_on_s3(trained: tuple[str, dict, Path], s3_examples: str, bucket: str, s3_server,
                                 empty_cwd: Path) -> None:  # noqa: ANN001
    model, serving = f"{trained[0]}/model", f"s3://{bucket}/serving"
    blessed, rejected = f"s3://{bucket}/eval_ok", f"s3://{bucket}/eval_strict"
    outcome = evaluate(EvaluatorConfig(model=model, examples=s3_examples, output=blessed,
                                       thresholds=("accuracy>=0",)), echo=lambda _: None)
    assert outcome.blessing.blessed and outcome.metrics["num_examples"] == EVAL
    assert _keys(s3_server, blessed) == ["BLESSED", "blessing.json", "canaries.tfrecord", "canary_predictions.npy",
                                         "confusion_matrix.png", "label_issues.jsonl", "label_issues.png",
                                         "metrics.json", "reliability_diagram.png"]
    never_met = ("log_loss<=0",)  # a valid threshold no softmax reaches (accuracy>1 is refused as impossible)
    evaluate(EvaluatorConfig(model=model, examples=s3_examples, output=rejected, thresholds=never_met),
             echo=lambda _: None)
    assert "NOT_BLESSED" in _keys(s3_server, rejected) and "BLESSED" not in _keys(s3_server, rejected)

    refused = push(PusherConfig(model=model, evaluation=rejected, serving_dir=serving), echo=lambda _: None)
    assert not refused.pushed and "fails threshold log_loss<=0" in refused.reasons[0]
    assert _keys(s3_server, serving) == [] and resolve_latest(serving) == ""
    first = push(PusherConfig(model=model, evaluation=blessed, serving_dir=serving, source={"run": "a"}),
                 echo=lambda _: None)
    again = push(PusherConfig(model=model, evaluation=blessed, serving_dir=serving), echo=lambda _: None)
    assert (first.version, again.version, again.location) == (1, 1, f"{serving}/1/model/1")  # already served: no copy
    other = f"s3://{bucket}/other-model"  # another model: the next version (served models are told apart by content)
    storage.copy_tree(model, other)
    info = storage.read_json(f"{other}/shardflow_model.json")
    storage.write_json(f"{other}/shardflow_model.json", {**info, "note": "another run's model"})  # its contract differs
    evaluate(EvaluatorConfig(model=other, examples=s3_examples, output=f"s3://{bucket}/eval_other",
                             baseline=f"{serving}/1/model/1", thresholds=("accuracy>=0",)),  # gated against the served one
             echo=lambda _: None)
    second = push(PusherConfig(model=other, evaluation=f"s3://{bucket}/eval_other", serving_dir=serving),
                  echo=lambda _: None)
    assert (second.version, second.location) == (2, f"{serving}/2/model/2")
    pointer = storage.read_json(f"{serving}/CURRENT.json")
    assert (pointer["version"], pointer["model"]) == (2, f"{serving}/2/model/2") and "run" not in pointer
    assert resolve_latest(serving) == f"{serving}/2/model/2"
    model_keys = _keys(s3_server, model)
    assert _keys(s3_server, f"{serving}/1/model/1") == model_keys == _keys(s3_server, f"{serving}/2/model/2")
    assert storage.read_bytes(f"{serving}/2/model/2/saved_model.pb") == storage.read_bytes(f"{model}/saved_model.pb")
    assert list(empty_cwd.iterdir()) == []


def _train_command(examples: str, output: str, steps: int, batch: int) -> list[str]:
    return [sys.executable, "-m", "shardflow", "train", "--examples", examples, "--output", output, "--steps",
            str(steps), "--checkpoint-every", "10", "--batch-size", str(batch), "--eval-split", "",
            "--input-probe-batches", "2", "--shuffle-buffer-mb", "0.5"]


def _env(s3_server, tmp: Path, **extra: str) -> dict[str, str]:  # noqa: ANN001
    tmp.mkdir(parents=True, exist_ok=True)
    return {**os.environ, **s3_server.env, "TMPDIR": str(tmp), **extra}  # conftest.py's process defaults


def test_killed_training_on_s3_resumes_to_the_same_step_count(s3_examples: str, bucket: str, s3_server,
                                                               tmp_path: Path) -> None:  # noqa: ANN001
    output, steps = f"s3://{bucket}/resumed", 120  # 18 epochs of backups left after the kill (300 had 48)
    work = tmp_path / "cwd"
    work.mkdir()
    env = _env(s3_server, tmp_path / "tmp")
    first = subprocess.Popen(_train_command(s3_examples, output, steps, 8), env=env, cwd=work,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    # Checkpoint 2 recorded whole on s3:// (step 12 of 120: 6-step epochs, a backup at each end): the kill
    # lands in training, past a checkpoint.
    wait_for(lambda: recorded_checkpoint(f"{output}/checkpoints") >= 2, first, 900, "second recorded checkpoint")
    first.send_signal(signal.SIGKILL)
    first.wait()
    keys = _keys(s3_server, output)
    assert "training.json" not in keys, "the run finished before it could be killed"
    assert not [k for k in keys if k.startswith("model/")]
    second = subprocess.run(_train_command(s3_examples, output, steps, 8), env=env, cwd=work, capture_output=True,
                            text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]  # 0, not tensorflow-io's teardown abort (134)
    summary = storage.read_json(f"{output}/training.json")
    assert summary["optimizer_steps"] == steps
    assert 0 < summary["resumed_from_step"] < steps
    assert read_model_info(f"{output}/model").extra["optimizer_steps"] == steps
    assert not [k for k in _keys(s3_server, output) if k.startswith("checkpoints/")]
    assert list(work.iterdir()) == []


def test_two_workers_sharing_only_s3_train_together(s3_examples: str, bucket: str, s3_server,
                                                    tmp_path: Path) -> None:  # noqa: ANN001
    output, steps = f"s3://{bucket}/multi", 12
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    workers, dirs = [], []
    for index in range(2):
        work = tmp_path / f"worker{index}" / "cwd"
        work.mkdir(parents=True)
        dirs.append(work)
        env = _env(s3_server, tmp_path / f"worker{index}" / "tmp",
                   TF_CONFIG=json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}}))
        workers.append(subprocess.Popen(_train_command(s3_examples, output, steps, 4), env=env, cwd=work,
                                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [w.communicate(timeout=600)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    reports = [storage.read_json(f"{output}/workers/worker-{i}.json") for i in range(2)]
    assert reports[0]["weights_sha256"] == reports[1]["weights_sha256"]
    assert [r["optimizer_steps"] for r in reports] == [steps, steps]
    info = read_model_info(f"{output}/model")  # only the chief exports, to s3
    assert (info.extra["strategy"], info.extra["workers"], info.extra["replicas"]) == ("multi_worker", 2, 2)
    assert "training.json" in _keys(s3_server, output)
    assert not [k for k in _keys(s3_server, output) if k.startswith("checkpoints/")]
    assert [list(d.iterdir()) for d in dirs] == [[], []]
