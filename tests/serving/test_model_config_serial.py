"""models.config's compare-and-swap is not fooled by a config rewritten to an earlier text (issue 66, 5a).

The sequence: the pointer names version 1, models.config serves 1. A writer P moves the pointer to 2, reads the
config's token (config 1), reads the pointer (2) and stalls. Meanwhile another writer writes config 2 and a
rollback serves 1 again: pointer 1, config 1 rewritten. Without the pointer's serial in it, that config is the
same bytes as the one P read (the same SHA-256 locally, the same ETag on S3), so P's conditional write of
config 2 succeeds: TF Serving serves 2, the pointer says 1. With the serial every config is unique: P's write
conflicts, it reads the pointer again and leaves config 1.
"""
from __future__ import annotations

import json

import pytest

from shardflow.core import storage
from shardflow.pusher import RollbackConfig, TfServing, push_model, read_pointer, tf_serving
from shardflow.pusher import rollback as rollback_module
from shardflow.pusher.serving import read_served, serve_pointer_version
from testkit.serving_oracle import candidate, configured

pytestmark = pytest.mark.unit  # in process, a few small files; the S3 parameter is cluster


@pytest.fixture(params=["local", pytest.param("s3", marks=pytest.mark.cluster)])
def serving(request: pytest.FixtureRequest, tmp_path) -> str:  # noqa: ANN001
    root = str(tmp_path / "root") if request.param == "local" else f"s3://{request.getfixturevalue('s3_bucket')}/r"
    one, _ = candidate(root, "one", "none")
    two, _ = candidate(root, "two", "none")
    location = storage.join(root, "serving")
    push_model(one, location, gated_against="none")
    push_model(two, location, gated_against=None)
    rollback_module.run(RollbackConfig(serving_dir=location, version=1), echo=lambda _: None)
    return location


def _stalled_writer_races_a_push_and_a_rollback(serving: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """P: the pointer moved to 2 (a rollback whose config write comes later), then P's config write stalls between
    reading the pointer and writing while another writer writes config 2 and a rollback serves 1 again."""
    with monkeypatch.context() as patch:
        patch.setattr(rollback_module, "serve_pointer_version", lambda *_: None)  # P's config write: below
        rollback_module.run(RollbackConfig(serving_dir=serving, version=2), echo=lambda _: None)
    assert configured(serving)[1] == 1 and read_pointer(serving)["version"] == 2
    calls = []

    def stalled_read() -> dict:
        pointer = read_served(serving).pointer  # P has read the config's token (config 1) and now the pointer (2)
        if not calls:
            assert serve_pointer_version(serving, TfServing()) == 2  # another writer: config 2
            rollback_module.run(RollbackConfig(serving_dir=serving, version=1), echo=lambda _: None)  # config 1
        calls.append(pointer["version"])
        return pointer

    tf_serving.publish_model_config(serving, TfServing(), stalled_read)


def test_a_stalled_config_write_never_serves_what_the_pointer_left(serving: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    _stalled_writer_races_a_push_and_a_rollback(serving, monkeypatch)
    assert read_pointer(serving)["version"] == 1 and configured(serving)[1] == 1  # P's stale write was refused
    text = storage.read_text(storage.join(serving, "models.config"))
    assert f"(pointer serial {read_pointer(serving)['serial']})" in text


def test_without_the_serial_the_same_sequence_serves_a_version_the_pointer_left(
        serving: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: configs rendered without the serial (as before) are fooled by the same sequence on this store."""
    render = tf_serving.render_model_config
    monkeypatch.setattr(tf_serving, "render_model_config", lambda served, version, serial=0: render(served, version))
    serve_pointer_version(serving, TfServing())  # config 1 as an unserialled writer writes it
    _stalled_writer_races_a_push_and_a_rollback(serving, monkeypatch)
    assert read_pointer(serving)["version"] == 1 and configured(serving)[1] == 2  # served 2, pointer 1
    assert json.loads(storage.read_text(storage.join(serving, "CURRENT.json")))["version"] == 1
