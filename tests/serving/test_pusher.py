"""The Pusher on a local disk and on a real S3 server (moto): versions, the pointer, blessing, `latest`.

The pusher copies bytes and reads the Evaluator's markers, so a model here is a small tree of files
with a shardflow_model.json, and an evaluation is the Evaluator's output files written by hand.
"""
from __future__ import annotations

import json
import os

import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.core.errors import ConfigError
from shardflow.pusher.layout import model_location
from shardflow.pusher import (ANY, LATEST, PusherConfig, ServingChanged, push_model, read_pointer, resolve_latest,
                              resolve_model_reference, run)

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


def _evaluation(root: str, name: str, model: str, blessed: bool | None, gated_against: str = "none") -> str:
    """The Evaluator's output as Push reads it: the model checked, the baseline it was gated against, the verdict."""
    out = storage.join(root, name)
    storage.write_text(storage.join(out, "metrics.json"), json.dumps({"model": model, "gated_against": gated_against}))
    if blessed is not None:
        marker = "BLESSED" if blessed else "NOT_BLESSED"
        storage.write_text(storage.join(out, marker), "accuracy = 0.5 fails threshold accuracy>=0.9\n")
    return out


def _tree(location: str) -> dict[str, bytes]:
    base = location if storage.is_remote(location) else location.replace(os.sep, "/")
    return {storage.relative_to(p if storage.is_remote(p) else p.replace(os.sep, "/"), base): storage.read_bytes(p)
            for p in storage.list_files(location)}


def _served_names(serving: str) -> list[str]:
    """What TF Serving sees in the serving directory: not the hidden claims and lock."""
    return [name for name in storage.list_names(serving) if not name.startswith(".")]


def test_blessed_models_become_versions_and_the_pointer_follows(root: str) -> None:
    serving = storage.join(root, "serving")
    first, second = _model(root, "run1"), _model(root, "run2", b"-v2")
    assert resolve_latest(serving) == "" and read_pointer(serving) is None
    one = run(PusherConfig(model=first, evaluation=_evaluation(root, "eval1", first, True), serving_dir=serving,
                           source={"data_fingerprint": "abc"}), echo=lambda _: None)
    gated = _evaluation(root, "eval2", second, True, gated_against=model_location(serving, 1))
    two = run(PusherConfig(model=second, evaluation=gated, serving_dir=serving), echo=lambda _: None)
    assert (one.pushed, one.version, two.version) == (True, 1, 2)
    assert two.location == model_location(serving, 2)
    assert _tree(model_location(serving, 1)) == _tree(first)
    assert _tree(model_location(serving, 2)) == _tree(second) != _tree(first)
    pointer = read_pointer(serving)
    assert (pointer["version"], pointer["model"]) == (2, model_location(serving, 2))
    assert pointer["pushed_at"].endswith("Z") and "data_fingerprint" not in pointer
    assert json.loads(storage.read_text(storage.join(serving, "CURRENT.json"))) == pointer
    assert _served_names(serving) == ["1", "2", "CURRENT.json", "models.config"]  # no temporary copies left
    assert resolve_model_reference(LATEST, serving) == model_location(serving, 2)
    assert resolve_model_reference(first, serving) == first
    # A baseline for the model served now, pushed from it: none (a model is not gated against itself).
    assert resolve_model_reference(LATEST, serving, candidate=second) == ""
    assert resolve_model_reference(LATEST, serving, candidate=first) == model_location(serving, 2)


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
    with pytest.raises(ConfigError, match="replace must be one of gated, any, got 'always'"):
        PusherConfig(model="m", evaluation="e", serving_dir="s", replace="always")
    with pytest.raises(ConfigError, match="source may not set \\['replaced_version'\\]"):
        PusherConfig(model="m", evaluation="e", serving_dir="s", source={"replaced_version": 1})
    with pytest.raises(ConfigError, match="source may not set \\['version'\\]"):
        PusherConfig(model="m", evaluation="e", serving_dir="s", source={"version": 9})
    with pytest.raises(ConfigError, match="lies in the serving directory"):
        PusherConfig(model="s3://b/serving/3", evaluation="e", serving_dir="s3://b/serving/")
    with pytest.raises(ConfigError, match="has no shardflow_model.json"):
        run(PusherConfig(model=str(tmp_path / "nothing"), evaluation="e", serving_dir=str(tmp_path / "s")))


def test_a_model_gated_against_what_is_no_longer_served_is_refused(root: str) -> None:
    """The issue's two runs: both gated while nothing was served; the second finds version 1 served and is
    refused with one line, and leaves the serving directory as it was. Gated against version 1, it is pushed."""
    serving, first, second = storage.join(root, "serving"), _model(root, "run1"), _model(root, "run2", b"-v2")
    assert run(PusherConfig(model=first, evaluation=_evaluation(root, "eval1", first, True), serving_dir=serving),
               echo=lambda _: None).pushed
    before, pointer = _tree(serving), read_pointer(serving)
    served = f"{model_location(serving, 1)} (version 1) is served now"
    elsewhere = storage.join(root, "elsewhere")
    cases = [("none", f"{served}, but the model was gated against none (nothing was served)"),
             (elsewhere, f"{served}, but the model was gated against {elsewhere}")]
    for name, (gated, line) in zip(("stale", "other"), cases):
        printed: list[str] = []
        result = run(PusherConfig(model=second, evaluation=_evaluation(root, name, second, True, gated),
                                  serving_dir=serving), echo=printed.append)
        assert not result.pushed and result.reasons == [line + ": evaluate it against the served model, then push "
                                                                "(a rerun of the pipeline does both)"]
        assert printed == [f"push: not pushed: {result.reasons[0]}"]
        assert _tree(serving) == before and read_pointer(serving) == pointer
    regated = _evaluation(root, "regated", second, True, gated_against=first)  # the served model's training output
    assert run(PusherConfig(model=second, evaluation=regated, serving_dir=serving), echo=lambda _: None).version == 2
    assert read_pointer(serving)["replaced_version"] == 1


def test_replace_any_takes_no_gate_and_push_model_raises_the_refusal(root: str) -> None:
    serving, first, second = storage.join(root, "serving"), _model(root, "run1"), _model(root, "run2", b"-v2")
    assert push_model(first, serving, gated_against="none") == (1, model_location(serving, 1))
    with pytest.raises(ServingChanged, match="version 1\\) is served now, but the model was gated against none"):
        push_model(second, serving, gated_against="none")
    unrecorded = storage.join(root, "old-eval")  # an Evaluator output without the record: refused, unless `any`
    storage.write_json(storage.join(unrecorded, "metrics.json"), {"model": second})
    storage.write_text(storage.join(unrecorded, "BLESSED"), "ok\n")
    refused = run(PusherConfig(model=second, evaluation=unrecorded, serving_dir=serving), echo=lambda _: None)
    assert not refused.pushed and "does not record the baseline it was gated against" in refused.reasons[0]
    forced = run(PusherConfig(model=second, evaluation=unrecorded, serving_dir=serving, replace=ANY),
                 echo=lambda _: None)
    assert forced.version == 2 and read_pointer(serving)["gated_against"] is None


def test_the_command_exits_75_with_the_lost_races_one_line(tmp_path, capsys: pytest.CaptureFixture) -> None:  # noqa
    root = str(tmp_path)
    serving, first, second = storage.join(root, "serving"), _model(root, "run1"), _model(root, "run2", b"-v2")
    for model, name in ((first, "eval1"), (second, "eval2")):
        code = shardflow_main(["push", "--model", model, "--evaluation", _evaluation(root, name, model, True),
                               "--serving-dir", serving])
        assert code == (0 if model == first else 75)  # retryable: a rerun evaluates against version 1
    printed = capsys.readouterr()
    assert printed.out.splitlines()[-1] == (f"push: not pushed: {serving}/1/model/1 (version 1) is served now, but the model "
                                            "was gated against none (nothing was served): evaluate it against the "
                                            "served model, then push (a rerun of the pipeline does both)")
    assert "Traceback" not in printed.err and _served_names(serving) == ["1", "CURRENT.json", "models.config"]
