"""Infra validation: the model loads and answers in a TensorFlow-only process as TF Serving would, or is refused.

One real model (tests/helpers_infra.py): scikit-learn's digits through ExampleGen (PNG storage) and a
5-step Trainer run, whose export has both signatures; the Evaluator scores it and keeps its canaries.
Here: the canaries, the blessed verdict, the probe started ahead, and the refusals of the check's own
limits (timeout, memory, bad options). Models a user wrapped, and what Push does with the verdict, are
in test_infra_push.py; the Pusher's side alone, on local disk and S3, is in test_push_infra_verdicts.py.
"""
from __future__ import annotations

import os
import shutil
import signal
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_io  # noqa: F401 - loaded in this process, so its absence from the probe's process means something

from helpers_infra import FORBIDDEN, QUIET, WARMUP, evaluation, examples, good_infra, model  # noqa: F401
from helpers_infra import report as _report
from helpers_processes import ends_within
from shardflow.cli import main as shardflow_main
from shardflow.core.errors import ConfigError
from shardflow.core.manifest import read_manifest
from shardflow.core.reader import shard_files
from shardflow.infra_validator import InfraValidatorConfig
from shardflow.infra_validator import run as infra_validate
from shardflow.infra_validator.probe_process import STANDBY_ENV, start_standby
from shardflow.infra_validator.config import DEFAULT_LATENCY_CALLS


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
    # every record checked; one run per signature and batch size, the others repeat canaries already answered
    assert report["warmup"] == {"file": WARMUP, "requests": 256, "replayed": 256, "run": 6}
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
