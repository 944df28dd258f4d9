"""Push with `--infra-validation`, the Pusher's side alone on local disk and S3: the verdict files are
written by hand (no TensorFlow), so every refusal is shown apart from a probe: INFRA_NOT_BLESSED with its
reason, a verdict on another model, a validation killed before its verdict; and a blessed push that
carries the warm-up file into the version."""
from __future__ import annotations

from pathlib import Path

import pytest

from shardflow.core import storage
from shardflow.pusher import PusherConfig
from shardflow.pusher import run as push

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

QUIET = {"echo": lambda _: None}
WARMUP = "assets.extra/tf_serving_warmup_requests"


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster)])  # s3: the server, so cluster
def place(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    return f"s3://{request.getfixturevalue('s3_bucket')}/root"


def _outputs(place: str, name: str, model: str, marker: str, reason: str = "") -> str:
    out = storage.join(place, name)
    storage.write_json(storage.join(out, "infra_validation.json"), {"model": model})
    storage.write_bytes(storage.join(out, *WARMUP.split("/")), b"warm-up records")
    storage.write_text(storage.join(out, marker), reason + "\n")
    return out


def test_push_with_infra_validation_on_local_disk_and_s3(place: str) -> None:
    """The Pusher's side alone (files written by hand): the warm-up file in the version, and each refusal."""
    model, other = storage.join(place, "run", "model"), storage.join(place, "other", "model")
    for location in (model, other):
        storage.write_bytes(storage.join(location, "saved_model.pb"), b"graph")
        storage.write_text(storage.join(location, "shardflow_model.json"), "{}")
    evaluation = storage.join(place, "eval")
    storage.write_json(storage.join(evaluation, "metrics.json"), {"model": model, "gated_against": "none"})
    storage.write_text(storage.join(evaluation, "BLESSED"), "ok\n")
    serving = storage.join(place, "serving")
    refusals = [(_outputs(place, "refused", model, "INFRA_NOT_BLESSED", "the probe did not finish within 9 s"),
                 "the probe did not finish within 9 s"),
                (_outputs(place, "theirs", other, "INFRA_BLESSED"), f"blessed {other}, not {model}")]
    killed = storage.join(place, "killed")
    storage.write_json(storage.join(killed, "infra_validation.json"), {"model": model})
    refusals.append((killed, "has no verdict (neither INFRA_BLESSED nor INFRA_NOT_BLESSED)"))
    results = []
    for infra, reason in refusals:
        result = push(PusherConfig(model=model, evaluation=evaluation, serving_dir=serving, infra_validation=infra),
                      **QUIET)
        assert not result.pushed and reason in result.reasons[0]
        results.append(result)
    assert not storage.exists(serving)
    blessed = _outputs(place, "infra", model, "INFRA_BLESSED")
    result = push(PusherConfig(model=model, evaluation=evaluation, serving_dir=serving, infra_validation=blessed),
                  **QUIET)
    assert result.pushed and storage.read_bytes(storage.join(result.location, *WARMUP.split("/"))) == b"warm-up records"
    served = [name for name in storage.list_names(serving) if not name.startswith(".")]  # less claims and lock
    assert served == ["1", "CURRENT.json", "models.config"]  # the copy was whole before the pointer moved
    assert result.exit_code == 0 and all(refused.exit_code == 3 for refused in results)
