"""Infra validation: the model loads and answers in a TensorFlow-only process as TF Serving would, or Push refuses it.

One real model per module: scikit-learn's digits through ExampleGen (PNG storage) and a 5-step
Trainer run, whose export has both signatures; the Evaluator scores it and keeps its canaries. Two
models are made from it by wrapping its SavedModel, as a user's custom export would:
- "tfio": its serving function also reads each image's EXIF orientation with tensorflow_io's
  `decode_jpeg_exif`, an op registered only when tensorflow_io is imported: it loads and is
  evaluated in this process (which imports tensorflow_io), and cannot load in TF Serving;
- "recalibrated": the same classes, probabilities pulled halfway to uniform: another model, whose
  evaluation the real model must not pass for its own.
The pushes with --infra-validation go through `shardflow push`; the Pusher's side alone, on local
disk and S3, is in test_push_infra_verdicts.py.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_io as tfio
from tensorflow_serving.apis import prediction_log_pb2

from helpers_processes import ends_within
from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.core.errors import ConfigError
from shardflow.core.manifest import read_manifest
from shardflow.core.reader import shard_files
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.infra_validator import InfraValidatorConfig
from shardflow.infra_validator import run as infra_validate
from shardflow.infra_validator.probe_process import STANDBY_ENV, start_standby
from shardflow.infra_validator.config import DEFAULT_LATENCY_CALLS
from shardflow.pusher import PusherConfig, read_pointer
from shardflow.pusher import run as push
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
from shardflow.trainer import run as train

QUIET = {"echo": lambda _: None}
WARMUP = "assets.extra/tf_serving_warmup_requests"
FORBIDDEN = ("shardflow", "tensorflow_io", "tf_keras")


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("infra")


@pytest.fixture(scope="module")
def examples(root: Path, demo_data: Path) -> Path:
    digits = demo_data / "digits"
    indexes = tuple(IndexSpec(str(digits / f"{split}.csv"), split) for split in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(digits), output=str(root / "examples"),
                                 storage=(("*", "png"),)), **QUIET)
    return root / "examples"


@pytest.fixture(scope="module")
def model(root: Path, examples: Path) -> Path:
    train(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=32, input_probe_batches=1),
                        fit=FitOptions(steps=5), export=ExportOptions(output=str(root / "train"))), **QUIET)
    return root / "train" / "model"


def _wrapped(model: Path, target: Path, serve_fn) -> Path:  # noqa: ANN001
    """A SavedModel whose serving_default is `serve_fn(base_signature, examples)`; shardflow_model.json kept."""
    base = tf.saved_model.load(str(model))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return serve_fn(base.signatures["serving_default"], examples)

    module = tf.Module()
    module.base, module.serve = base, serve
    tf.saved_model.save(module, str(target), signatures={"serving_default": serve})
    shutil.copy(model / "shardflow_model.json", target / "shardflow_model.json")
    return target


def _with_exif_orientation(signature, examples: tf.Tensor) -> dict[str, tf.Tensor]:  # noqa: ANN001
    images = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([], tf.string)})["x"]
    orientation = tf.map_fn(tfio.experimental.image.decode_jpeg_exif, images, fn_output_signature=tf.int64)
    return {**signature(examples=examples), "orientation": orientation}


def _recalibrated(signature, examples: tf.Tensor) -> dict[str, tf.Tensor]:  # noqa: ANN001
    out = signature(examples=examples)
    probabilities = 0.5 * out["probabilities"] + 0.5 / 10
    return {"probabilities": probabilities, "class_ids": tf.argmax(probabilities, axis=-1)}


def _evaluate(model: Path, examples: Path, output: Path) -> Path:
    outcome = evaluate(EvaluatorConfig(model=str(model), examples=str(examples), output=str(output),
                                       thresholds=("accuracy>=0",)), **QUIET)
    assert outcome.blessing.blessed
    return output


@pytest.fixture(scope="module")
def evaluation(root: Path, model: Path, examples: Path) -> Path:
    return _evaluate(model, examples, root / "eval")


@pytest.fixture(scope="module")
def good_infra(root: Path, model: Path, evaluation: Path) -> tuple[int, Path]:
    """`shardflow infra-validate` of the trained model with its defaults (batch sizes 1, 8, 32; 256 requests)."""
    out = root / "infra"
    code = shardflow_main(["infra-validate", "--model", str(model), "--evaluation", str(evaluation),
                           "--output", str(out)])
    return code, out


def _report(out: Path) -> dict:
    return json.loads((out / "infra_validation.json").read_text())


def _tree(location: Path) -> dict[str, bytes]:
    return {str(p.relative_to(location)): p.read_bytes() for p in sorted(location.rglob("*")) if p.is_file()}


def _first_records(examples: Path, count: int) -> list[bytes]:
    manifest = read_manifest(examples)
    files = shard_files(examples, manifest, "eval")
    dataset = tf.data.TFRecordDataset(files, compression_type=manifest.compression).take(count)
    return [record.numpy() for record in dataset]


def test_the_evaluator_keeps_the_first_256_examples_it_scored_and_their_probabilities(
        evaluation: Path, model: Path, examples: Path) -> None:
    assert read_manifest(examples).splits["eval"].num_examples > 256  # the bound, not the split, sets the count
    canaries = list(tf.data.TFRecordDataset(str(evaluation / "canaries.tfrecord")).as_numpy_iterator())
    assert canaries == _first_records(examples, 256)
    probabilities = np.load(evaluation / "canary_predictions.npy")
    served = tf.saved_model.load(str(model)).signatures["serving_default"](examples=tf.constant(canaries))
    assert probabilities.shape == (256, 10)
    np.testing.assert_allclose(probabilities, served["probabilities"].numpy(), atol=1e-6)


def test_the_canaries_are_bounded_in_bytes() -> None:
    """224-px JPEG examples are ~20 KB: the canaries stop at 1 MB of whole examples, their probabilities in step;
    an example larger than the bound is still kept alone."""
    from shardflow.evaluator.executor import CANARY_BYTES, _CanaryRecorder

    def signature(examples: tf.Tensor) -> dict[str, tf.Tensor]:  # a row of probabilities per example
        return {"probabilities": tf.one_hot(tf.strings.length(examples) % 3, 3)}

    recorder = _CanaryRecorder(signature)
    for batch in range(4):
        recorder(tf.constant([b"x" * 20_000 + bytes([batch, i]) for i in range(32)]))
    assert len(recorder.records) == CANARY_BYTES // 20_002 == 52
    assert recorder.records[-1] == b"x" * 20_000 + bytes([1, 19])  # the second batch's 20th: in order, whole
    assert np.concatenate(recorder.probabilities).shape == (52, 3)
    huge = _CanaryRecorder(signature)
    huge(tf.constant([b"y" * (CANARY_BYTES + 1), b"z"]))
    assert huge.records == [b"y" * (CANARY_BYTES + 1)] and np.concatenate(huge.probabilities).shape == (1, 3)


def test_a_trained_model_is_infra_blessed_in_a_tensorflow_only_process(good_infra: tuple[int, Path]) -> None:
    code, out = good_infra
    assert code == 0 and (out / "INFRA_BLESSED").is_file() and not (out / "INFRA_NOT_BLESSED").exists()
    report = _report(out)
    assert report["blessed"] and report["signatures"] == ["serving_default", "serving_image"]
    assert report["canaries"] == 256 and report["tolerance"] == 1e-4
    assert all(0 <= report["max_abs_diff"][name] <= 1e-4 for name in report["signatures"])
    assert report["load_seconds"] > 0
    rows = {(row["signature"], row["batch_size"]): row for row in report["latency"]}
    assert set(rows) == {(s, b) for s in report["signatures"] for b in (1, 8, 32)}
    assert all(row["calls"] == DEFAULT_LATENCY_CALLS and 0 < row["p50_ms"] <= row["p99_ms"] for row in rows.values())
    assert report["warmup"] == {"file": WARMUP, "requests": 256, "replayed": 256}
    # This process runs shardflow with tensorflow_io and tf_keras loaded; the probe had neither.
    assert {"tensorflow_io", "tf_keras"} <= set(sys.modules) and os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    modules = report["probe"]["modules"]
    assert "tensorflow" in modules and not [m for m in modules if m.startswith(FORBIDDEN)]
    assert report["probe"]["exit_code"] == 0 and report["probe"]["command"][1] == "-I"
    verdict = (out / "INFRA_BLESSED").read_text().splitlines()
    assert verdict[0].startswith("loads in a TensorFlow-only process") and len(verdict) == 4


def _standby() -> int:
    """A standby probe started by this process (as the warm step worker starts one): its pid."""
    start_standby()
    return int(os.environ[STANDBY_ENV].split()[1])


def test_a_probe_started_ahead_gives_the_fresh_probes_verdict_and_serves_once(
        tmp_path: Path, model: Path, evaluation: Path, good_infra: tuple[int, Path]) -> None:
    standby = _standby()
    result = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation),
                                                 output=str(tmp_path / "infra")), **QUIET)
    ahead, fresh = _report(tmp_path / "infra"), _report(good_infra[1])
    assert result.blessed and ahead["probe"]["started_ahead"] and not fresh["probe"]["started_ahead"]
    for same in ("signatures", "canaries", "max_abs_diff", "warmup"):
        assert ahead[same] == fresh[same], same
    modules = ahead["probe"]["modules"]
    assert "tensorflow" in modules and not [m for m in modules if m.startswith(FORBIDDEN)]
    assert ahead["probe"]["exit_code"] == 0 and ahead["probe"]["command"][1] == "-I"
    assert STANDBY_ENV not in os.environ and ends_within(standby, 10)  # taken once; it ended with its probe


def test_a_standby_is_killed_at_the_timeout_and_a_gone_one_leaves_the_probe_to_a_fresh_process(
        tmp_path: Path, model: Path, evaluation: Path) -> None:
    standby = _standby()
    timed_out = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation), timeout=0.5,
                                                    output=str(tmp_path / "late")), **QUIET)
    assert timed_out.reasons == ["the probe did not finish within 0.5 s (timeout)"] and ends_within(standby, 10)
    assert _report(tmp_path / "late")["probe"]["started_ahead"]
    os.kill(_standby(), signal.SIGKILL)  # one that died before it was asked (the OOM killer, say)
    small = {"batch_sizes": (4,), "warmup_requests": 8, "latency_calls": 3}
    result = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation), **small,
                                                 output=str(tmp_path / "fresh")), **QUIET)
    assert result.blessed and not _report(tmp_path / "fresh")["probe"]["started_ahead"]


def test_push_copies_the_warmup_file_into_the_version_and_the_model_answers_it(
        tmp_path: Path, good_infra: tuple[int, Path], model: Path, evaluation: Path) -> None:
    _, out = good_infra
    serving = tmp_path / "serving"
    assert shardflow_main(["push", "--model", str(model), "--evaluation", str(evaluation), "--serving-dir",
                           str(serving), "--infra-validation", str(out)]) == 0
    warmup = serving / "1" / WARMUP
    assert warmup.read_bytes() == (out / WARMUP).read_bytes()
    assert _tree(serving / "1") == {**_tree(model), WARMUP: warmup.read_bytes()}
    served = tf.saved_model.load(str(serving / "1"))
    canaries = np.load(evaluation / "canary_predictions.npy")
    logs = [prediction_log_pb2.PredictionLog.FromString(r.numpy()) for r in tf.data.TFRecordDataset(str(warmup))]
    assert len(logs) == 256
    seen = []
    for log in logs:
        request = log.predict_log.request
        name = request.model_spec.signature_name
        inputs = {key: tf.constant(tf.make_ndarray(value)) for key, value in request.inputs.items()}
        answer = served.signatures[name](**inputs)
        (batch,) = {int(t.shape[0]) for t in inputs.values()}
        assert answer["probabilities"].shape == (batch, 10)
        seen.append((name, batch))
    # every shape of every signature once, then single examples taking turns (the file stays small)
    shapes = [(s, b) for b in (1, 8, 32) for s in ("serving_default", "serving_image")]
    assert seen[:6] == shapes and seen[6:] == [shapes[i % 2] for i in range(250)]
    first = logs[0].predict_log.request  # canary 0 through serving_default: the Evaluator's probabilities
    answer = served.signatures["serving_default"](examples=tf.constant(tf.make_ndarray(first.inputs["examples"])))
    np.testing.assert_allclose(answer["probabilities"].numpy()[0], canaries[0], atol=1e-4)


def test_a_model_needing_tensorflow_io_is_refused_and_serving_is_unchanged(
        tmp_path: Path, root: Path, model: Path, examples: Path, evaluation: Path, good_infra: tuple[int, Path],
        capsys: pytest.CaptureFixture) -> None:
    tfio_model = _wrapped(model, tmp_path / "tfio_model", _with_exif_orientation)
    tfio_evaluation = _evaluate(tfio_model, examples, tmp_path / "tfio_eval")  # loads and answers here
    result = infra_validate(InfraValidatorConfig(model=str(tfio_model), evaluation=str(tfio_evaluation),
                                                 output=str(tmp_path / "tfio_infra")), **QUIET)
    (reason,) = result.reasons
    assert not result.blessed and "Op type not registered 'IO>DecodeJpegExif'" in reason
    assert reason.startswith("the TensorFlow-only probe failed: loading the model: ") and "Traceback" not in reason
    assert (tmp_path / "tfio_infra" / "INFRA_NOT_BLESSED").read_text() == reason + "\n"
    assert not (tmp_path / "tfio_infra" / "INFRA_BLESSED").exists()

    serving = tmp_path / "serving"
    assert shardflow_main(["push", "--model", str(model), "--evaluation", str(evaluation), "--serving-dir",
                           str(serving), "--infra-validation", str(good_infra[1])]) == 0
    before, pointer = _tree(serving), read_pointer(str(serving))
    capsys.readouterr()
    code = shardflow_main(["push", "--model", str(tfio_model), "--evaluation", str(tfio_evaluation),
                           "--serving-dir", str(serving), "--infra-validation", str(tmp_path / "tfio_infra")])
    assert code == 3 and capsys.readouterr().out.strip().splitlines() == [f"push: not pushed: {reason}"]
    assert _tree(serving) == before and read_pointer(str(serving)) == pointer


def test_predictions_other_than_the_evaluators_are_refused(tmp_path: Path, model: Path, examples: Path,
                                                          evaluation: Path) -> None:
    other = _wrapped(model, tmp_path / "recalibrated", _recalibrated)
    other_evaluation = _evaluate(other, examples, tmp_path / "other_eval")
    result = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(other_evaluation),
                                                 output=str(tmp_path / "infra"), batch_sizes=(4,),
                                                 warmup_requests=8, latency_calls=3), **QUIET)
    assert not result.blessed and [reason.split(":")[0] for reason in result.reasons] == ["serving_default",
                                                                                          "serving_image"]
    for reason in result.reasons:
        assert ": probabilities differ from the Evaluator's by up to " in reason
        assert reason.endswith("more than the tolerance 0.0001")
    ours, theirs = (np.load(e / "canary_predictions.npy") for e in (evaluation, other_evaluation))
    for name in ("serving_default", "serving_image"):  # the same images both ways
        assert result.max_abs_diff[name] == pytest.approx(float(np.abs(ours - theirs).max()), abs=1e-6)
    assert result.max_abs_diff["serving_default"] > 1e-4 and result.load_seconds > 0
    assert _report(tmp_path / "infra")["warmup"]["replayed"] == 8  # the probe itself ran to the end


@pytest.mark.parametrize("options, reason", [
    ({"timeout": 0.5}, "the probe did not finish within 0.5 s (timeout)"),
    # a LeNet example holds ~0.1 MB of activations: 4,096 of them cannot fit 1 MB, so batch 4,096 never runs
    ({"batch_sizes": (1, 4096), "memory_mb": 1}, "the TensorFlow-only probe failed: batch size 4096 of "
                                                 "'serving_default' needs about "),
])
def test_a_probe_that_times_out_or_exceeds_the_memory_budget_is_refused_in_one_line(
        tmp_path: Path, model: Path, evaluation: Path, options: dict, reason: str) -> None:
    result = infra_validate(InfraValidatorConfig(model=str(model), evaluation=str(evaluation),
                                                 output=str(tmp_path / "infra"), **options), **QUIET)
    assert not result.blessed and len(result.reasons) == 1 and result.reasons[0].startswith(reason)
    assert (tmp_path / "infra" / "INFRA_NOT_BLESSED").read_text() == result.reasons[0] + "\n"
    if "memory_mb" in options:
        assert result.reasons[0].endswith("over the 1 MB budget: time smaller --batch-sizes or raise --memory-mb")
        assert result.latency == []  # refused before any batch was timed


def test_bad_options_and_inputs_are_named(tmp_path: Path, model: Path, evaluation: Path,
                                          capsys: pytest.CaptureFixture) -> None:
    def config(**options: object) -> InfraValidatorConfig:
        return InfraValidatorConfig(**{"model": "m", "evaluation": "e", "output": "o", **options})

    for options, message in [({"batch_sizes": (1, 0)}, "batch_sizes must be integers >= 1"),
                             ({"tolerance": float("nan")}, "tolerance must be a finite number >= 0"),
                             ({"warmup_requests": 1001}, "from 1 to 1000"),
                             ({"timeout": 0}, "timeout must be a number of seconds > 0"),
                             ({"latency_seconds": -1}, "latency_seconds must be a number of seconds > 0"),
                             ({"output": "e/infra"}, "must be a directory apart from evaluation")]:
        with pytest.raises(ConfigError, match=message):
            config(**options)
    old = tmp_path / "old_eval"  # an evaluation from before the canaries
    shutil.copytree(evaluation, old)
    (old / "canaries.tfrecord").unlink()
    argv = ["infra-validate", "--model", str(model), "--evaluation", str(old), "--output", str(tmp_path / "o")]
    assert shardflow_main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "has no canaries.tfrecord: evaluate the model again" in line
    assert shardflow_main([*argv[:-2], "--output", str(tmp_path / "o"), "--batch-sizes", "1,x"]) == 2
    assert "batch sizes must be integers" in capsys.readouterr().err


def test_infra_validation_reads_and_writes_s3_and_push_takes_its_warmup_file_there(
        s3_bucket: str, model: Path, evaluation: Path) -> None:
    bucket = f"s3://{s3_bucket}"
    storage.copy_tree(str(model), f"{bucket}/train/model")
    storage.copy_tree(str(evaluation), f"{bucket}/eval")
    out = f"{bucket}/infra"
    result = infra_validate(InfraValidatorConfig(model=f"{bucket}/train/model", evaluation=f"{bucket}/eval",
                                                 output=out, batch_sizes=(2,), warmup_requests=6,
                                                 latency_calls=30, latency_seconds=1e-9), **QUIET)
    assert result.blessed and result.output == out
    assert [row["calls"] for row in result.latency] == [3, 3]  # the time budget spent: the 3 calls always made
    assert storage.list_names(out) == ["INFRA_BLESSED", "assets.extra", "infra_validation.json"]
    assert storage.read_json(f"{out}/infra_validation.json")["warmup"]["replayed"] == 6
    # The evaluation scored the local copy: say it scored the bucket's, as an evaluation on S3 would.
    storage.write_json(f"{bucket}/eval/metrics.json",
                       {**storage.read_json(f"{bucket}/eval/metrics.json"), "model": f"{bucket}/train/model"})
    pushed = push(PusherConfig(model=f"{bucket}/train/model", evaluation=f"{bucket}/eval",
                               serving_dir=f"{bucket}/serving", infra_validation=out), **QUIET)
    assert pushed.pushed and storage.read_bytes(f"{pushed.location}/{WARMUP}") == storage.read_bytes(f"{out}/{WARMUP}")
