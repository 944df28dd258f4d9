"""`shardflow clean-serving --keep K`: served versions beyond the K most recent removed, never a protected one.

Protected: the pointer's version, a canary (CANARY.json), a --protect one, the registry alias's (--tracking-uri).
A retired version is no rollback target (exit 2, naming the retirement); a rollback racing the retirement is
refused (exit 75) rather than served from a folder being removed; a clean killed mid-delete leaves a version
without saved_model.pb (not whole to TF Serving or KServe), which the next clean removes.
"""
from __future__ import annotations

import json

import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.pusher import RollbackConfig, ServingChanged, push_model, read_pointer
from shardflow.pusher import cleanup as cleanup_module
from shardflow.pusher import rollback as rollback_module
from shardflow.pusher.layout import model_location
from shardflow.pusher.retention import CANARY, protected_versions, retire_versions
from testkit.serving_oracle import candidate, configured

pytestmark = pytest.mark.unit  # in process, a few small files; the S3 parameter is cluster


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster)])
def serving(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    """Versions 1..5 pushed, each gated against the one before."""
    root = str(tmp_path / "root") if request.param == "local" else f"s3://{request.getfixturevalue('s3_bucket')}/r"
    location, gated = storage.join(root, "serving"), "none"
    for number in range(1, 6):
        model, _ = candidate(root, f"m{number}", gated)
        push_model(model, location, gated_against=gated)
        gated = read_pointer(location)["model"]
    return location


def _versions(serving: str) -> list[int]:
    return sorted(int(name) for name in storage.list_names(serving) if name.isdigit())


def test_keep_removes_the_oldest_versions_but_never_a_protected_one(serving: str, capsys) -> None:  # noqa: ANN001
    assert shardflow_main(["rollback", "--serving-dir", serving, "--version", "2"]) == 0
    storage.write_text(storage.join(serving, CANARY), json.dumps({"version": 3}))
    assert protected_versions(serving) == {2, 3}
    assert shardflow_main(["clean-serving", "--serving-dir", serving, "--keep", "1", "--protect", "1"]) == 0
    assert _versions(serving) == [1, 2, 3, 5]  # 5 the most recent, 2 pointed, 3 the canary, 1 --protect
    pointer = read_pointer(serving)
    assert sorted(pointer["served_versions"], key=int) == ["1", "2", "3", "5"] and pointer["retired_versions"] == [4]
    assert pointer["version"] == 2 and configured(serving)[1] == 2  # what is served did not move
    assert f"removed {storage.join(serving, '4')}" in capsys.readouterr().out
    assert shardflow_main(["rollback", "--serving-dir", serving, "--version", "4"]) == 2
    assert "version 4 was retired by clean-serving --keep" in capsys.readouterr().err
    storage.remove(storage.join(serving, CANARY))
    assert shardflow_main(["clean-serving", "--serving-dir", serving, "--keep", "2"]) == 0
    assert _versions(serving) == [2, 3, 5] and read_pointer(serving)["retired_versions"] == [1, 4]  # 2, 3 recent
    model, evaluation = candidate(storage.parent(serving), "m6", read_pointer(serving)["model"])
    assert shardflow_main(["push", "--model", model, "--evaluation", evaluation, "--serving-dir", serving]) == 0
    assert read_pointer(serving)["version"] == 6 and read_pointer(serving)["retired_versions"] == [1, 4]  # kept


def test_a_clean_killed_mid_delete_leaves_no_version_that_looks_whole(serving: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    remove = storage.remove

    def killed(location: str) -> None:
        if storage.basename(location) != "saved_model.pb":
            raise KeyboardInterrupt("killed")  # after saved_model.pb went, before the rest
        remove(location)

    monkeypatch.setattr(cleanup_module.storage, "remove", killed)
    with pytest.raises(KeyboardInterrupt):
        retire_versions(serving, keep=4)
    monkeypatch.setattr(cleanup_module.storage, "remove", remove)
    assert read_pointer(serving)["retired_versions"] == [1] and _versions(serving) == [1, 2, 3, 4, 5]
    assert not storage.is_file(storage.join(model_location(serving, 1), "saved_model.pb"))  # not whole: no model
    assert storage.is_file(storage.join(model_location(serving, 1), "variables", "variables.index"))
    assert retire_versions(serving, keep=4) == [1] and _versions(serving) == [2, 3, 4, 5]  # the next clean ends it


def test_a_rollback_racing_the_retirement_of_its_version_is_refused(serving: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    swap = rollback_module.swap_pointer

    def retired_meanwhile(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        retire_versions(serving, keep=1)  # between the rollback's checks and its swap
        return swap(*args, **kwargs)

    monkeypatch.setattr(rollback_module, "swap_pointer", retired_meanwhile)
    with pytest.raises(ServingChanged, match="version 1 was retired"):
        rollback_module.run(RollbackConfig(serving_dir=serving, version=1), echo=lambda _: None)
    assert read_pointer(serving)["version"] == 5 and configured(serving)[1] == 5 and _versions(serving) == [5]


@pytest.mark.pipeline  # MLflow's registry on SQLite: a few seconds of migrations
def test_the_registry_alias_version_is_kept_when_a_tracking_uri_is_given(tmp_path) -> None:  # noqa: ANN001
    from mlflow.tracking import MlflowClient

    from shardflow.tracking.registry import SERVED_URI_TAG, VERSION_TAG

    root = tmp_path / "digits"
    serving, gated = str(root / "serving"), "none"
    for number in range(1, 4):
        model, _ = candidate(str(root), f"m{number}", gated)
        push_model(model, serving, gated_against=gated)
        gated = read_pointer(serving)["model"]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri, uri)
    client.create_registered_model("digits")
    elsewhere = client.create_model_version("digits", source=str(tmp_path / "other" / "serving" / "2"),
                                            tags={VERSION_TAG: "2", SERVED_URI_TAG: str(tmp_path / "other/serving/2")})
    client.set_registered_model_alias("digits", "other", elsewhere.version)
    assert shardflow_main(["clean-serving", "--serving-dir", serving, "--keep", "1", "--tracking-uri", uri,
                           "--alias", "other", "--protect", "1"]) == 0
    assert _versions(serving) == [1, 3]  # another output's version 2 protects nothing here
    registered = client.create_model_version("digits", source=model_location(serving, 1),  # tagged as registry.py does
                                             tags={VERSION_TAG: "1", SERVED_URI_TAG: model_location(serving, 1)})
    client.set_registered_model_alias("digits", "champion", registered.version)
    assert shardflow_main(["clean-serving", "--serving-dir", serving, "--keep", "1", "--tracking-uri", uri]) == 0
    assert _versions(serving) == [1, 3]  # 1: the alias's (a registry that lags the pointer), 3: pointed and recent
    assert shardflow_main(["clean-serving", "--serving-dir", serving, "--keep", "1", "--tracking-uri", uri,
                           "--alias", "challenger"]) == 0
    assert _versions(serving) == [3]  # no such alias: nothing more protected
