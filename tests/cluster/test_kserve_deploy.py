"""shardflow deploy / promote / rollback against a loopback Kubernetes API (tests/fake_kube_server.py) that
validates every object it is asked to store, dry run or not, with KServe's CRD schema (tests/kserve_crd/) and
the canary rules of KServe's webhook: what is served, CURRENT.json, TF Serving's models.config and `latest`
(the next baseline) agree after every command, and a refusal changes nothing anywhere.

The serving directories are made by the real Pusher (push_model) from small model folders whose saved_model.pb
records the TensorFlow release that "exported" them, as a SavedModel does.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from shardflow.cli import main
from shardflow.deployer.saved_model_version import _field, trained_with
from shardflow.pusher import push_model, resolve_latest
from shardflow.pusher.retention import protected_versions
from shardflow.pusher.serving import read_served

from fake_kube_server import FakeKubeServer

NS, NAME = "ml", "digits"


def model(tmp: Path, tag: str, tensorflow: str = "2.16.2") -> str:
    """A model folder: a saved_model.pb recording `tensorflow`, and content of its own."""
    folder = tmp / "train" / tag / "model"
    (folder / "variables").mkdir(parents=True)
    meta_info = _field(1, b"v1") + _field(5, tensorflow.encode())
    (folder / "saved_model.pb").write_bytes(_field(1, 1) + _field(2, _field(1, meta_info)))
    (folder / "variables" / "variables.index").write_bytes(tag.encode() * 10)
    return str(folder)


def push(tmp: Path, serving: Path, tag: str, tensorflow: str = "2.16.2") -> int:
    version, _ = push_model(model(tmp, tag, tensorflow), str(serving), gated_against=None)
    return version


def shardflow(kube: FakeKubeServer, *argv: str) -> int:
    return main([*argv, "--kube-api", kube.url, "--namespace", NS, "--inference-service", NAME])


def deploy(kube: FakeKubeServer, serving: Path, *argv: str) -> int:
    return shardflow(kube, "deploy", "--serving-dir", str(serving), "--runtime-version", "2.16.1",
                     "--service-account", "tf-serving", *argv)


def isvc(kube: FakeKubeServer) -> dict:
    return kube.stored[(NS, NAME)]


def served(kube: FakeKubeServer) -> tuple[str, list[tuple[str, int, str]]]:
    """(the stable predictor's storageUri, [(canary storageUri, percent, name)]) in Standard mode."""
    spec = isvc(kube)["spec"]
    canaries = [(c["predictor"]["model"]["storageUri"], c["trafficPercent"], c["predictor"]["name"])
                for c in spec.get("canary") or []]
    return spec["predictor"]["model"]["storageUri"], canaries


def pointer(serving: Path) -> dict:
    return read_served(str(serving)).pointer


def uri(serving: Path, version: int) -> str:
    return read_served(str(serving)).record["served_versions"][str(version)]["storage_uri"]


def config_version(serving: Path) -> int:
    text = (serving / "models.config").read_text()
    return int(text.split("versions:")[1].split("}")[0])


@pytest.fixture()
def kube() -> FakeKubeServer:
    with FakeKubeServer() as server:
        yield server


def test_deploy_creates_then_follows_each_push_with_one_version_per_storage_uri(kube: FakeKubeServer,
                                                                                tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    assert push(tmp_path, serving, "a") == 1
    assert deploy(kube, serving) == 0
    model_spec = isvc(kube)["spec"]["predictor"]["model"]
    assert model_spec["storageUri"] == pointer(serving)["storage_uri"] == uri(serving, 1)
    assert (model_spec["modelFormat"], model_spec["runtimeVersion"]) == ({"name": "tensorflow"}, "2.16.1")
    assert model_spec["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"},
                                       "limits": {"cpu": "2", "memory": "4Gi"}}
    assert isvc(kube)["spec"]["predictor"]["serviceAccountName"] == "tf-serving"
    assert isvc(kube)["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "Standard"
    # What KServe's storage initializer downloads: exactly one integer folder, the pointer's version.
    assert [p.name for p in Path(model_spec["storageUri"]).iterdir()] == ["1"]
    assert [(r.method, r.dry_run) for r in kube.writes()] == [("POST", True), ("POST", False)]
    assert deploy(kube, serving) == 0  # already served: nothing sent
    assert len(kube.writes()) == 2
    assert push(tmp_path, serving, "b") == 2
    (tmp_path / "pushed").write_text(pointer(serving)["model"] + "\n")  # the pipeline's Push note
    assert deploy(kube, serving, "--output", str(tmp_path / "out"), "--pushed", str(tmp_path / "pushed")) == 0
    assert served(kube) == (uri(serving, 2), [])
    record = json.loads((tmp_path / "out" / "deployed.json").read_text())
    assert (record["version"], record["storage_uri"], record["canary"]) == (2, uri(serving, 2), None)
    assert record["pushed"] == pointer(serving)["model"] and record["changed"] is True
    assert [(r.method, r.dry_run) for r in kube.writes()][2:] == [("PATCH", True), ("PATCH", False)]
    assert all(r.content_type == "application/merge-patch+json" for r in kube.writes() if r.method == "PATCH")


def test_a_canary_in_standard_mode_is_promoted_with_the_pointer(kube: FakeKubeServer, tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    # Version 1 stays the served one (the next baseline), version 2 takes 10 % as a named canary.
    assert served(kube) == (uri(serving, 1), [(uri(serving, 2), 10, "v2")])
    assert isvc(kube)["spec"]["predictor"]["name"] == "v1"
    assert pointer(serving)["version"] == 1 and pointer(serving)["canary"]["version"] == 2
    assert protected_versions(str(serving)) == {1, 2}  # clean-serving --keep removes neither
    assert resolve_latest(str(serving)) == pointer(serving)["model"] and config_version(serving) == 1
    assert deploy(kube, serving, "--canary-percent", "30") == 0
    assert served(kube) == (uri(serving, 1), [(uri(serving, 2), 30, "v2")])
    assert pointer(serving)["canary"]["percent"] == 30
    assert shardflow(kube, "promote", "--serving-dir", str(serving)) == 0
    assert served(kube) == (uri(serving, 2), [])
    assert isvc(kube)["spec"]["predictor"]["name"] == "v2"  # the canary's name: KServe keeps its pods
    assert pointer(serving)["version"] == 2 and "canary" not in pointer(serving) and config_version(serving) == 2
    assert pointer(serving)["action"] == "promote" and protected_versions(str(serving)) == {2}
    assert shardflow(kube, "promote", "--serving-dir", str(serving)) == 2  # nothing left to promote


def test_a_canary_in_knative_mode_is_rolled_back_with_the_pointer(kube: FakeKubeServer, tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving, "--mode", "Knative") == 0
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--canary-percent", "20") == 0
    predictor = isvc(kube)["spec"]["predictor"]
    assert (predictor["model"]["storageUri"], predictor["canaryTrafficPercent"]) == (uri(serving, 2), 20)
    assert "name" not in predictor and "canary" not in isvc(kube)["spec"]
    assert pointer(serving)["version"] == 1 and pointer(serving)["canary"]["version"] == 2
    assert shardflow(kube, "rollback", "--serving-dir", str(serving), "--version", "1") == 0
    predictor = isvc(kube)["spec"]["predictor"]
    assert predictor["model"]["storageUri"] == uri(serving, 1) and "canaryTrafficPercent" not in predictor
    assert pointer(serving)["version"] == 1 and "canary" not in pointer(serving) and config_version(serving) == 1
    push(tmp_path, serving, "c")
    assert deploy(kube, serving) == 0
    assert shardflow(kube, "rollback", "--serving-dir", str(serving), "--version", "1") == 0
    assert isvc(kube)["spec"]["predictor"]["model"]["storageUri"] == uri(serving, 1)
    assert pointer(serving)["version"] == 1 and resolve_latest(str(serving)) == pointer(serving)["model"]


def _state(serving: Path, kube: FakeKubeServer) -> tuple:
    files = {p.name: p.read_bytes() for p in serving.iterdir() if p.is_file()}
    return files, json.dumps(list(kube.stored.values()), sort_keys=True), len(kube.writes(dry_run=False))


@pytest.mark.parametrize("case", ["no inference service", "forbidden", "invalid", "conflict", "old runtime",
                                  "percent 0", "percent 100", "knative without the stable version"])
def test_bad_input_is_one_line_exit_2_and_changes_nothing(kube: FakeKubeServer, tmp_path: Path, case: str,
                                                          capsys: pytest.CaptureFixture) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    if case != "no inference service":
        assert deploy(kube, serving, *(["--mode", "Knative"] if case.startswith("knative") else [])) == 0
    push(tmp_path, serving, "b", tensorflow="2.17.0")
    if case.startswith("knative"):
        kube.stored[(NS, NAME)]["spec"]["predictor"]["model"]["storageUri"] = "s3://elsewhere/model"
    before = _state(serving, kube)
    capsys.readouterr()
    argv = {"no inference service": ("promote", "--serving-dir", str(serving)),
            "old runtime": ("deploy", "--serving-dir", str(serving), "--runtime-version", "2.16.1"),
            "percent 0": ("deploy", "--serving-dir", str(serving), "--runtime-version", "2.17.0",
                          "--canary-percent", "0"),
            "percent 100": ("deploy", "--serving-dir", str(serving), "--runtime-version", "2.17.0",
                            "--canary-percent", "100")}.get(
        case, ("deploy", "--serving-dir", str(serving), "--runtime-version", "2.17.0", "--canary-percent", "5"))
    refusals = {"forbidden": (403, "Forbidden", "inferenceservices is forbidden: User cannot patch"),
                "invalid": (422, "Invalid", "admission webhook denied the request"),
                "conflict": (409, "Conflict", "the object has been modified")}
    if case in refusals:
        kube.refuse("PATCH", *refusals[case])
    assert shardflow(kube, *argv) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error, error
    expected = {"no inference service": "does not exist", "forbidden": "403 Forbidden",
                "invalid": "422 Unprocessable Entity: admission webhook denied",
                "conflict": "409 Conflict", "old runtime": "below the TensorFlow the model was trained with (2.17.0)",
                "percent 0": "1 to 99", "percent 100": "1 to 99", "knative without the stable version":
                "deploy version 1 first"}[case]
    assert expected in error, error
    assert _state(serving, kube) == before


def test_a_body_the_crd_schema_refuses_is_refused_at_the_dry_run_and_nothing_moves(
        kube: FakeKubeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    before = _state(serving, kube)
    # KServe's CRD requires a canary's model to name its container (spec.canary[].predictor.model.name).
    from shardflow.deployer import inference_service

    def unnamed(*args: object) -> dict:
        spec = original(*args)
        spec["model"].pop("name")
        return spec

    original = inference_service.predictor_spec
    monkeypatch.setattr(inference_service, "predictor_spec", unnamed)
    capsys.readouterr()
    assert deploy(kube, serving, "--canary-percent", "10") == 2
    assert "'name' is a required property" in capsys.readouterr().err
    assert _state(serving, kube) == before and [r.dry_run for r in kube.writes()][-1] is True
    monkeypatch.undo()
    assert deploy(kube, serving, "--canary-percent", "10") == 0


def test_a_push_racing_a_canary_deploy_wins_and_the_inference_service_is_untouched(kube: FakeKubeServer,
                                                                                  tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    kube.before = lambda request: push(tmp_path, serving, "c") if request.dry_run else None
    stored = json.dumps(list(kube.stored.values()), sort_keys=True)
    assert deploy(kube, serving, "--canary-percent", "10") == 75  # the pointer moved under it: deploy again
    assert json.dumps(list(kube.stored.values()), sort_keys=True) == stored
    assert pointer(serving)["version"] == 3 and "canary" not in pointer(serving)
    kube.before = None
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    assert served(kube) == (uri(serving, 2), [(uri(serving, 3), 10, "v3")])


def test_a_promotion_cut_off_before_its_patch_is_finished_by_running_it_again(kube: FakeKubeServer,
                                                                               tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    assert deploy(kube, serving) == 0
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--canary-percent", "10") == 0
    kube.refuse("PATCH", 503, "ServiceUnavailable", "etcd leader changed", dry_run=False)
    assert shardflow(kube, "promote", "--serving-dir", str(serving)) == 1
    assert pointer(serving)["version"] == 2 and served(kube)[1]  # the pointer moved, the canary is still there
    assert shardflow(kube, "promote", "--serving-dir", str(serving)) == 0
    assert served(kube) == (uri(serving, 2), []) and pointer(serving)["version"] == 2


def test_the_training_tensorflow_is_read_from_a_real_saved_model(tmp_path: Path) -> None:
    import tensorflow as tf

    tf.saved_model.save(tf.Module(), str(tmp_path / "m"))
    assert trained_with(str(tmp_path / "m")) == tf.__version__


def test_a_serving_directory_on_a_volume_is_served_through_its_claim(kube: FakeKubeServer, tmp_path: Path) -> None:
    serving = tmp_path / "serving"
    push(tmp_path, serving, "a")
    push(tmp_path, serving, "b")
    assert deploy(kube, serving, "--kserve-storage-base", "pvc://artifacts/serving") == 0
    assert served(kube) == ("pvc://artifacts/serving/2/model", [])
    assert shardflow(kube, "rollback", "--serving-dir", str(serving), "--version", "1",
                     "--kserve-storage-base", "pvc://artifacts/serving") == 0
    assert served(kube) == ("pvc://artifacts/serving/1/model", [])
    assert deploy(kube, serving, "--kserve-storage-base", "artifacts/serving") == 2
