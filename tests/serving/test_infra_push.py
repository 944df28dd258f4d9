"""Infra validation's verdict in Push's hands, and models a user wrapped, as a custom export would.

The model is tests/helpers_infra.py's (digits, a 5-step Trainer run, the Evaluator's canaries). Two
models are made from it by wrapping its SavedModel:
- "tfio": its serving function also reads each image's EXIF orientation with tensorflow_io's
  `decode_jpeg_exif`, an op registered only when tensorflow_io is imported: it loads and is
  evaluated in this process (which imports tensorflow_io), and cannot load in TF Serving;
- "recalibrated": the same classes, probabilities pulled halfway to uniform: another model, whose
  evaluation the real model must not pass for its own.
The pushes with --infra-validation go through `shardflow push`; the Pusher's side alone, on local
disk and S3, is in test_push_infra_verdicts.py.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_io as tfio
from tensorflow_serving.apis import prediction_log_pb2

from helpers_infra import QUIET, WARMUP, evaluation, examples, good_infra, model  # noqa: F401
from helpers_infra import evaluated as _evaluate
from helpers_infra import report as _report
from helpers_infra import tree as _tree
from helpers_infra import wrapped as _wrapped
from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.infra_validator import InfraValidatorConfig
from shardflow.infra_validator import run as infra_validate
from shardflow.pusher import PusherConfig, read_pointer
from shardflow.pusher import run as push


def _with_exif_orientation(signature, examples: tf.Tensor) -> dict[str, tf.Tensor]:  # noqa: ANN001
    images = tf.io.parse_example(examples, {"x": tf.io.FixedLenFeature([], tf.string)})["x"]
    orientation = tf.map_fn(tfio.experimental.image.decode_jpeg_exif, images, fn_output_signature=tf.int64)
    return {**signature(examples=examples), "orientation": orientation}


def _recalibrated(signature, examples: tf.Tensor) -> dict[str, tf.Tensor]:  # noqa: ANN001
    out = signature(examples=examples)
    probabilities = 0.5 * out["probabilities"] + 0.5 / 10
    return {"probabilities": probabilities, "class_ids": tf.argmax(probabilities, axis=-1)}


def test_push_copies_the_warmup_file_into_the_version_and_the_model_answers_it(
        tmp_path: Path, good_infra: tuple[int, Path], model: Path, evaluation: Path) -> None:
    _, out = good_infra
    serving = tmp_path / "serving"
    assert shardflow_main(["push", "--model", str(model), "--evaluation", str(evaluation), "--serving-dir",
                           str(serving), "--infra-validation", str(out)]) == 0
    warmup = serving / "1" / "model" / "1" / WARMUP
    assert warmup.read_bytes() == (out / WARMUP).read_bytes()
    assert _tree(serving / "1" / "model" / "1") == {**_tree(model), WARMUP: warmup.read_bytes()}
    served = tf.saved_model.load(str(serving / "1" / "model" / "1"))
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
        tmp_path: Path, model: Path, examples: Path, evaluation: Path, good_infra: tuple[int, Path],
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
