"""The probe's warm-up replay: every record checked, and run unless the call would repeat one already made.

A record is skipped only when the same signature already ran a batch of its size and the record feeds it
nothing but canaries that signature answered. The model here parses each input string as a number, so a
record holding anything else fails when it runs: a skipped record that should have run would pass unseen.
"""
from __future__ import annotations

from pathlib import Path

import pytest
import tensorflow as tf
from tensorflow_serving.apis import model_pb2, predict_pb2, prediction_log_pb2

from shardflow.infra_validator import probe
from shardflow.infra_validator.warmup import warmup_file_bytes, warmup_records

pytestmark = pytest.mark.unit
CANARIES = [b"1", b"2", b"3"]


class _Numbers(tf.Module):
    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def serve(self, x: tf.Tensor) -> dict[str, tf.Tensor]:
        return {"value": tf.strings.to_number(x)}


def _model() -> tf.Module:
    module = _Numbers()
    module.signatures = {"serving_default": module.serve.get_concrete_function()}
    return module


def _request(values: list[bytes]) -> bytes:
    request = predict_pb2.PredictRequest(model_spec=model_pb2.ModelSpec(signature_name="serving_default"))
    request.inputs["x"].CopyFrom(tf.make_tensor_proto(values, dtype=tf.string, shape=[len(values)]))
    log = prediction_log_pb2.PredictionLog(predict_log=prediction_log_pb2.PredictLog(request=request))
    return log.SerializeToString()


def _replay(tmp_path: Path, records: list[bytes]) -> dict:
    path = tmp_path / "warmup"
    path.write_bytes(warmup_file_bytes(records))
    return probe._replay_warmup(tf, _model(), str(path), {"serving_default": ("x", set(CANARIES))})


def test_a_file_of_canaries_is_checked_whole_and_run_once_per_batch_size(tmp_path: Path) -> None:
    records = warmup_records({"serving_default": ("x", CANARIES)}, count=40, batch_sizes=(1, 2))
    replayed = _replay(tmp_path, records)
    assert replayed["records"] == 40 and replayed["by_signature"] == {"serving_default": 40}
    assert replayed["run"] == 2  # one batch of 1, one of 2: the other 38 repeat those calls


@pytest.mark.parametrize("position", [0, 5])
def test_a_record_holding_other_values_runs_and_its_failure_is_said(tmp_path: Path, position: int) -> None:
    records = warmup_records({"serving_default": ("x", CANARIES)}, count=10, batch_sizes=(1,))
    records.insert(position, _request([b"not a number"]))
    with pytest.raises(probe.ProbeError, match=f"replaying warm-up record {position}"):
        _replay(tmp_path, records)


def test_a_new_batch_size_runs_even_with_canaries_only(tmp_path: Path) -> None:
    records = warmup_records({"serving_default": ("x", CANARIES)}, count=6, batch_sizes=(1,))
    replayed = _replay(tmp_path, records + [_request(CANARIES)])
    assert replayed["records"] == 7 and replayed["run"] == 2


def test_a_record_naming_a_signature_the_model_lacks_is_refused_even_when_it_would_be_skipped(tmp_path: Path) -> None:
    other = prediction_log_pb2.PredictionLog.FromString(_request([b"1"]))
    other.predict_log.request.model_spec.signature_name = "serving_other"
    records = warmup_records({"serving_default": ("x", CANARIES)}, count=4, batch_sizes=(1,))
    with pytest.raises(probe.ProbeError, match="names signature 'serving_other'"):
        _replay(tmp_path, records + [other.SerializeToString()])
