"""The Trainer on real shards: accuracy on digits, serving = training, resume after SIGKILL, corruption.

The digits demo set goes through ExampleGen (2 train shards) and Transform once per module. The
kill-and-resume and two-worker tests run `shardflow train` in subprocesses; their s3:// twins are
in test_s3_trainer.py.
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
import tf_keras as keras

from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import read_model_info
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.core.reader import shard_files
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig, run
from shardflow.trainer.executor import weights_digest
from shardflow.core.errors import ConfigError
from shardflow.trainer.input_pipeline import CorruptShardError, TooFewShardsError
from shardflow.transform import TransformConfig
from shardflow.transform import run as transform

from helpers_models import free_ports
from helpers_processes import recorded_checkpoint, wait_for
from helpers_transform import read_transformed

STATED_ACCURACY = 0.9  # digits, LeNet, 240 steps of 64: ~0.95-0.97 measured


@pytest.fixture(scope="module")
def digits(digits_examples: Path) -> Path:
    return digits_examples  # the session's, 2 train shards (tests/shared_fixtures.py); read only


@pytest.fixture(scope="module")
def digits_transformed(digits: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("digits") / "transform"
    transform(TransformConfig(examples=str(digits), output=str(out)), echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def trained(digits_transformed: Path) -> tuple[Path, dict]:
    out = digits_transformed.parent / "model"
    return out, run(TrainerConfig(input=InputOptions(examples=str(digits_transformed), batch_size=64,
                                                     input_probe_batches=10),
                                  fit=FitOptions(steps=240, checkpoint_every=50),
                                  export=ExportOptions(output=str(out))), echo=lambda _: None)


def test_lenet_on_digits_reaches_the_stated_eval_accuracy(trained: tuple[Path, dict]) -> None:
    out, summary = trained
    assert summary["optimizer_steps"] == 240
    assert summary["history"][-1]["val_accuracy"] >= STATED_ACCURACY
    history = json.loads((out / "history.json").read_text())["epochs"]
    assert [e["epoch"] for e in history] == list(range(1, len(history) + 1))
    assert history[-1]["optimizer_steps"] == 240
    assert (out / "curves.png").stat().st_size > 1000
    report = json.loads((out / "input_report.json").read_text())
    assert report["verdict"] in ("input-bound", "not input-bound")
    assert report["input_examples_per_second"] > 0 and report["training_examples_per_second"] > 0
    assert not (out / "checkpoints").exists()  # a finished run leaves no resume state behind


def test_serving_signature_on_raw_examples_equals_the_model_on_transformed_data(
        trained: tuple[Path, dict], digits: Path, digits_transformed: Path) -> None:
    out, _ = trained
    manifest = read_manifest(digits)
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(digits, manifest, "eval"))]
    served = tf.saved_model.load(str(out / "model")).signatures["serving_default"](examples=tf.constant(records))
    transformed = read_transformed(digits_transformed, "eval")
    keras_model = keras.models.load_model(str(out / "model"), compile=False)
    in_memory = keras_model({"x": transformed["x"]}).numpy()
    np.testing.assert_allclose(served["probabilities"].numpy(), in_memory, atol=1e-5)
    np.testing.assert_array_equal(served["class_ids"].numpy(), in_memory.argmax(-1))
    info = read_model_info(out / "model")
    assert (info.task, info.label, info.num_classes) == ("classification", "y", 10)
    assert info.extra["materialized"] and info.extra["transform_graph"].endswith("transform_graph")
    accuracy = (served["class_ids"].numpy() == transformed["y"]).mean()
    assert accuracy >= STATED_ACCURACY


def test_raw_examples_with_the_transform_graph_on_the_fly_train_and_serve(digits: Path, digits_transformed: Path,
                                                                          tmp_path: Path) -> None:
    summary = run(TrainerConfig(input=InputOptions(examples=str(digits), transform=str(digits_transformed),
                                                   augment=("rotate", "brightness"), input_probe_batches=5),
                                fit=FitOptions(steps=30), export=ExportOptions(output=str(tmp_path / "m"))),
                  echo=lambda _: None)
    assert summary["optimizer_steps"] == 30 and not summary["materialized"]
    assert summary["train_time_augmentation"] == ["rotate", "brightness"]
    assert read_model_info(tmp_path / "m" / "model").extra["transform_graph"] == str(digits_transformed / "transform_graph")


def test_warm_start_loads_the_exported_weights(trained: tuple[Path, dict], digits_transformed: Path) -> None:
    out, summary = trained
    from shardflow.trainer.model_builder import build_model
    from shardflow.trainer.task import resolve_task

    config = TrainerConfig(input=InputOptions(examples=str(digits_transformed)), fit=FitOptions(steps=1),
                           export=ExportOptions(output="unused"))
    assert weights_digest(build_model(resolve_task(config.input), config)) != summary["weights_sha256"]
    warmed = TrainerConfig(input=InputOptions(examples=str(digits_transformed)),
                           model=ModelOptions(warm_start=str(out / "model")), fit=FitOptions(steps=1),
                           export=ExportOptions(output="unused"))
    assert weights_digest(build_model(resolve_task(warmed.input), warmed)) == summary["weights_sha256"]
    unet_config = TrainerConfig(input=InputOptions(examples=str(digits_transformed)),
                                model=ModelOptions(name="unet"), fit=FitOptions(steps=1),
                                export=ExportOptions(output="unused"))
    with pytest.raises(ConfigError, match="unet"):
        build_model(resolve_task(unet_config.input), unet_config)


def _train_command(examples: Path, out: Path, steps: int) -> list[str]:
    return [sys.executable, "-m", "shardflow", "train", "--examples", str(examples), "--output", str(out),
            "--steps", str(steps), "--checkpoint-every", "10", "--batch-size", "32", "--eval-split", ""]


def test_killed_training_resumes_to_the_same_step_count(digits: Path, tmp_path: Path) -> None:
    out, steps = tmp_path / "model", 400
    env = dict(os.environ)  # the process defaults: the command's own (core/process_defaults.py)
    first = subprocess.Popen(_train_command(digits, out, steps), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    # Checkpoint 2 recorded whole (by step 20 of 400): the kill lands in training, past a checkpoint.
    wait_for(lambda: recorded_checkpoint(str(out / "checkpoints")) >= 2, first, 900, "second recorded checkpoint")
    first.send_signal(signal.SIGKILL)
    first.wait()
    assert not (out / "training.json").exists(), "the run finished before it could be killed"
    assert not (out / "model").exists()
    second = subprocess.run(_train_command(digits, out, steps), env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr[-3000:]
    summary = json.loads((out / "training.json").read_text())
    assert summary["optimizer_steps"] == steps  # an uninterrupted run makes exactly `steps` (first test)
    assert 0 < summary["resumed_from_step"] < steps
    assert read_model_info(out / "model").extra["optimizer_steps"] == steps


def test_a_corrupt_shard_stops_training_naming_the_file(digits: Path, tmp_path: Path) -> None:
    broken = tmp_path / "examples"
    import shutil

    shutil.copytree(digits, broken)
    shard = Path(shard_files(broken, read_manifest(broken), "train")[1])
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, so only the CRC can tell
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match=str(shard)):
        run(TrainerConfig(input=InputOptions(examples=str(broken), input_probe_batches=1, shuffle_buffer_mb=0),
                          fit=FitOptions(epochs=2), export=ExportOptions(output=str(tmp_path / "m"))),
            echo=lambda _: None)
    assert not (tmp_path / "m" / "model").exists()
    # The failed fit's TensorBoard writer was ended: its step is no longer this thread's summary step
    # (left set, later scalars in the process were recorded only on that dead step's multiples).
    assert tf.summary.experimental.get_step() is None


def test_too_few_shards_for_the_workers_is_a_clear_error(digits: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = {"worker": [f"127.0.0.1:{p}" for p in (1, 2, 3)]}
    monkeypatch.setenv("TF_CONFIG", json.dumps({"cluster": cluster, "task": {"type": "worker", "index": 0}}))
    with pytest.raises(TooFewShardsError, match=r"2 eval shard\(s\) .* for 3 workers.*--min-shards 3"):
        run(TrainerConfig(input=InputOptions(examples=str(digits)), fit=FitOptions(steps=1),
                          export=ExportOptions(output=str(tmp_path / "m"))), echo=lambda _: None)


def test_two_workers_train_together_and_end_with_the_same_weights(digits: Path, tmp_path: Path) -> None:
    out, steps = tmp_path / "model", 20
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    workers = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": cluster, "task": {"type": "worker", "index": index}})}
        command = _train_command(digits, out, steps) + ["--batch-size", "16"]
        workers.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs = [w.communicate(timeout=600)[0] for w in workers]
    assert [w.returncode for w in workers] == [0, 0], logs[0][-2000:] + logs[1][-2000:]
    reports = [json.loads((out / "workers" / f"worker-{i}.json").read_text()) for i in range(2)]
    assert reports[0]["weights_sha256"] == reports[1]["weights_sha256"]
    assert [r["optimizer_steps"] for r in reports] == [steps, steps]
    info = read_model_info(out / "model")  # only the chief exports
    assert (info.extra["strategy"], info.extra["workers"], info.extra["replicas"]) == ("multi_worker", 2, 2)
    assert "(multi_worker, 2 replica(s))" in logs[0]


def test_eval_stream_is_never_augmented_and_train_stream_is(digits: Path) -> None:
    from shardflow.trainer.features import RawToModel
    from shardflow.trainer.input_pipeline import build_streams
    from shardflow.trainer.task import resolve_task

    config = TrainerConfig(input=InputOptions(examples=str(digits), augment=("rotate", "brightness"),
                                              shuffle_buffer_mb=0, deterministic=True, batch_size=32),
                           fit=FitOptions(steps=1), export=ExportOptions(output="unused"))
    task = resolve_task(config.input)
    streams = build_streams(task, config.input, 32, 1, RawToModel(task, None))
    plain = [b["x"].numpy() / 255.0 for b in build_stream(digits, "eval", StreamOptions(batch_size=32)).take(2)]
    evaluated = [inputs["x"].numpy() for inputs, _ in streams.eval.take(2)]
    for got, want in zip(evaluated, plain):
        np.testing.assert_allclose(got, want, atol=1e-6)
    trained_batch = next(iter(streams.train))[0]["x"].numpy()
    first_train = next(iter(build_stream(digits, "train", StreamOptions(batch_size=32))))["x"].numpy() / 255.0
    assert not np.allclose(trained_batch, first_train, atol=1e-3)


def test_unet_trains_on_masks_and_serves_per_pixel_classes(demo_data: Path, tmp_path: Path) -> None:
    index = demo_data / "segmentation" / "index.csv"
    seg = index.parent
    examples = tmp_path / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(index)),), data_root=str(seg), output=str(examples)),
                echo=lambda _: None)
    summary = run(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=8, num_classes=2,
                                                   augment=("flip", "crop"), input_probe_batches=2),
                                fit=FitOptions(steps=6), export=ExportOptions(output=str(tmp_path / "m"))),
                  echo=lambda _: None)
    info = read_model_info(tmp_path / "m" / "model")
    assert (info.task, info.num_classes, summary["optimizer_steps"]) == ("segmentation", 2, 6)
    manifest = read_manifest(examples)
    records = [r.numpy() for r in tf.data.TFRecordDataset(shard_files(examples, manifest, "eval")).take(3)]
    served = tf.saved_model.load(str(tmp_path / "m" / "model")).signatures["serving_default"](examples=tf.constant(records))
    height, width, _ = manifest.features[info.label].shape
    assert served["class_ids"].shape == (len(records), height, width)
    assert served["probabilities"].shape == (len(records), height, width, 2)


def test_segmentation_logs_mean_iou_and_dice_per_epoch_as_the_evaluator_scores_them(demo_data: Path,
                                                                                    tmp_path: Path) -> None:
    from shardflow.evaluator import EvaluatorConfig
    from shardflow.evaluator import run as evaluate

    index = demo_data / "segmentation" / "index.csv"
    examples = tmp_path / "examples"
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(index)),), data_root=str(index.parent), output=str(examples)),
                echo=lambda _: None)
    run(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=8, num_classes=2, input_probe_batches=1),
                      fit=FitOptions(epochs=2), export=ExportOptions(output=str(tmp_path / "m"))), echo=lambda _: None)
    epochs = json.loads((tmp_path / "m" / "history.json").read_text())["epochs"]
    history = {name: [entry[name] for entry in epochs] for name in epochs[-1]}
    for name in ("mean_iou", "mean_dice", "val_mean_iou", "val_mean_dice"):
        assert len(history[name]) == 2 and all(0.0 <= v <= 1.0 for v in history[name]), (name, history[name])
    evaluate(EvaluatorConfig(model=str(tmp_path / "m" / "model"), examples=str(examples), output=str(tmp_path / "e"),
                             thresholds=("mean_iou>=0",)), echo=lambda _: None)
    overall = json.loads((tmp_path / "e" / "metrics.json").read_text())["overall"]
    # The last epoch's validation pass scores the final weights on the eval split, as the Evaluator does.
    assert history["val_mean_iou"][-1] == pytest.approx(overall["mean_iou"], abs=1e-4)
    assert history["val_mean_dice"][-1] == pytest.approx(overall["mean_dice"], abs=1e-4)
