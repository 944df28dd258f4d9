"""The Pusher on a local disk and on a real S3 server (moto): versions, the pointer, blessing, `latest`.

The pusher copies bytes and reads the Evaluator's markers, so a model here is a small tree of files
with a shardflow_model.json, and an evaluation is the Evaluator's output files written by hand.
"""
from __future__ import annotations

import json
import os

import pytest

from shardflow.core import storage
from shardflow.core.errors import ConfigError
from shardflow.pusher import LATEST, PusherConfig, read_pointer, resolve_latest, resolve_model_reference, run

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

MODEL_FILES = {"saved_model.pb": b"graph", "variables/variables.index": b"index",
               "variables/variables.data-00000-of-00001": b"\x00" * 3000, "shardflow_model.json": b"{}"}


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster)])  # s3: the server, so cluster
def root(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    if request.param == "local":
        return str(tmp_path / "root")
    return f"s3://{request.getfixturevalue('s3_bucket')}/root"


def _model(root: str, name: str, tag: bytes = b"") -> str:
    model = storage.join(root, name, "model")
    for relative, data in MODEL_FILES.items():
        storage.write_bytes(storage.join(model, *relative.split("/")), data + tag)
    return model


def _evaluation(root: str, name: str, model: str, blessed: bool | None) -> str:
    out = storage.join(root, name)
    storage.write_text(storage.join(out, "metrics.json"), json.dumps({"model": model}))
    if blessed is not None:
        marker = "BLESSED" if blessed else "NOT_BLESSED"
        storage.write_text(storage.join(out, marker), "accuracy = 0.5 fails threshold accuracy>=0.9\n")
    return out


def _tree(location: str) -> dict[str, bytes]:
    base = location if storage.is_remote(location) else location.replace(os.sep, "/")
    return {storage.relative_to(p if storage.is_remote(p) else p.replace(os.sep, "/"), base): storage.read_bytes(p)
            for p in storage.list_files(location)}


def test_blessed_models_become_versions_and_the_pointer_follows(root: str) -> None:
    serving = storage.join(root, "serving")
    first, second = _model(root, "run1"), _model(root, "run2", b"-v2")
    assert resolve_latest(serving) == "" and read_pointer(serving) is None
    one = run(PusherConfig(model=first, evaluation=_evaluation(root, "eval1", first, True), serving_dir=serving,
                           source={"data_fingerprint": "abc"}), echo=lambda _: None)
    two = run(PusherConfig(model=second, evaluation=_evaluation(root, "eval2", second, True), serving_dir=serving),
              echo=lambda _: None)
    assert (one.pushed, one.version, two.version) == (True, 1, 2)
    assert two.location == storage.join(serving, "2")
    assert _tree(storage.join(serving, "1")) == _tree(first)
    assert _tree(storage.join(serving, "2")) == _tree(second) != _tree(first)
    pointer = read_pointer(serving)
    assert (pointer["version"], pointer["model"]) == (2, storage.join(serving, "2"))
    assert pointer["pushed_at"].endswith("Z") and "data_fingerprint" not in pointer
    assert json.loads(storage.read_text(storage.join(serving, "CURRENT.json"))) == pointer
    assert storage.list_names(serving) == ["1", "2", "CURRENT.json"]  # no temporary copies left
    assert resolve_model_reference(LATEST, serving) == storage.join(serving, "2")
    assert resolve_model_reference(first, serving) == first


def test_an_unblessed_or_unfinished_or_other_models_evaluation_pushes_nothing(root: str) -> None:
    serving, model, other = storage.join(root, "serving"), _model(root, "run"), _model(root, "other")
    cases = [(_evaluation(root, "rejected", model, False), "fails threshold accuracy>=0.9"),
             (_evaluation(root, "killed", model, None), "has no verdict"),
             (_evaluation(root, "theirs", other, True), f"blessed {other}, not {model}")]
    for evaluation, reason in cases:
        result = run(PusherConfig(model=model, evaluation=evaluation, serving_dir=serving), echo=lambda _: None)
        assert not result.pushed and result.version is None and reason in result.reasons[0]
    assert not storage.exists(serving) and resolve_latest(serving) == ""


def test_bad_configs_are_named(tmp_path) -> None:  # noqa: ANN001
    with pytest.raises(ConfigError, match="model must be a non-empty path"):
        PusherConfig(model="", evaluation="e", serving_dir="s")
    with pytest.raises(ConfigError, match="not 'latest'"):
        PusherConfig(model=LATEST, evaluation="e", serving_dir="s")
    with pytest.raises(ConfigError, match="source may not set \\['version'\\]"):
        PusherConfig(model="m", evaluation="e", serving_dir="s", source={"version": 9})
    with pytest.raises(ConfigError, match="lies in the serving directory"):
        PusherConfig(model="s3://b/serving/3", evaluation="e", serving_dir="s3://b/serving/")
    with pytest.raises(ConfigError, match="has no shardflow_model.json"):
        run(PusherConfig(model=str(tmp_path / "nothing"), evaluation="e", serving_dir=str(tmp_path / "s")))
