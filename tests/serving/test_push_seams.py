"""Push at its seams with what is around it: killed at every stage, a store without conditional writes, a rollback.

What TF Serving would serve is read as the server reads it (helpers_push.served_now: the model config through
TF Serving's own proto, then the version's files), never from shardflow's records alone.

- A push SIGKILLed after its claim, mid-copy, after the copy (locally the rename) or after the pointer's swap
  never changes what TF Serving serves to an ungated model; the next push removes what it left and succeeds.
- On a store that ignores If-Match / If-None-Match the push is refused in one line (exit 2), nothing copied.
- Rollback serves version 1 again: `latest`, a baseline and TF Serving agree; a model gated against the version
  rolled back from is refused (exit 75); a version never served is refused (exit 2).
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core import storage
from shardflow.pusher import LATEST, read_pointer, resolve_latest, resolve_model_reference
from shardflow.pusher.layout import model_location
from testkit.serving_oracle import candidate, served_now

KILLER = Path(__file__).parents[1] / "push_killed.py"
STAGES = ("claimed", "mid-copy", "copied", "swapped")


@pytest.fixture(params=[pytest.param("local", marks=pytest.mark.pipeline),  # subprocesses: not the unit tier
                        pytest.param("s3", marks=pytest.mark.cluster)])  # s3: the server, so cluster
def root(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "local":
        return str(tmp_path / "root")
    return f"s3://{request.getfixturevalue('s3_bucket')}/root"


def _push_argv(model: str, evaluation: str, serving: str) -> list[str]:
    return ["push", "--model", model, "--evaluation", evaluation, "--serving-dir", serving]


def _push(root: str, serving: str, tag: str) -> int:
    """`shardflow push` in this process of a new model gated against what is served now; its exit status."""
    served = read_pointer(serving)
    return shardflow_main(_push_argv(*candidate(root, tag, served["model"] if served else "none"), serving))


def _versions(serving: str) -> list[str]:
    """What a server listing the base path sees: the integer-named folders."""
    return sorted((name for name in storage.list_names(serving) if name.isdigit()), key=int)


def test_a_push_killed_at_any_stage_never_changes_what_is_served_and_the_next_cleans_up(root: str) -> None:
    serving = storage.join(root, "serving")
    assert _push(root, serving, "base") == 0 and served_now(serving) == (1, "base")
    served = [(1, "base")]
    for stage in STAGES:
        gated = read_pointer(serving)["model"]
        model, evaluation = candidate(root, f"killed-{stage}", gated)
        killed = subprocess.run([sys.executable, str(KILLER), stage, "--", *_push_argv(model, evaluation, serving)],
                                capture_output=True, text=True, timeout=120)
        assert killed.returncode == -9, (stage, killed.stderr[-2000:])  # SIGKILLed where the stage says
        pointer = read_pointer(serving)
        if stage == "swapped":  # it won the swap (gated against the served model) before TF Serving's config
            assert pointer["pushed_from"].endswith(f"killed-{stage}/model")
            served.append((pointer["version"], f"killed-{stage}"))
        assert served_now(serving) == served[-2 if stage == "swapped" else -1]  # never an ungated model
        assert _push(root, serving, f"after-{stage}") == 0  # cleans up what the killed push left, then pushes
        pointer = read_pointer(serving)
        served.append((pointer["version"], f"after-{stage}"))
        assert served_now(serving) == served[-1]
        assert _versions(serving) == sorted(pointer["served_versions"], key=int)  # no orphan left
        claims = storage.list_names(storage.join(serving, ".claims"))
        assert sorted(claims, key=int) == sorted(pointer["served_versions"], key=int)  # no stale claim left
        assert not [name for name in storage.list_names(serving) if ".tmp-" in name and name[1:2].isdigit()]
    assert [v for v, _ in served] == sorted({v for v, _ in served})  # versions only ever grew


@pytest.mark.cluster
def test_a_store_that_ignores_conditional_headers_is_refused_before_anything_is_copied(
        s3_unconditional_server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,  # noqa: ANN001
        capsys: pytest.CaptureFixture) -> None:
    for name, value in s3_unconditional_server.env.items():
        monkeypatch.setenv(name, value)
    storage.forget_clients()
    try:
        bucket = s3_unconditional_server.bucket()
        model, evaluation = candidate(str(tmp_path), "m", "none")
        serving = f"s3://{bucket}/serving"
        assert shardflow_main(_push_argv(model, evaluation, serving)) == 2
        error = capsys.readouterr().err.strip().splitlines()
        assert len(error) == 1 and f"s3://{bucket} does not enforce conditional writes" in error[0], error
        assert s3_unconditional_server.keys(bucket) == []  # nothing copied, claimed or probed left
    finally:
        storage.forget_clients()


def test_rollback_serves_an_earlier_version_again_through_the_same_swap(root: str) -> None:
    serving = storage.join(root, "serving")
    assert _push(root, serving, "one") == 0 and _push(root, serving, "two") == 0
    assert served_now(serving) == (2, "two")
    stale_model, stale_evaluation = candidate(root, "gated-on-two", read_pointer(serving)["model"])
    assert shardflow_main(["rollback", "--serving-dir", serving, "--version", "1"]) == 0
    pointer = read_pointer(serving)
    assert (pointer["version"], pointer["action"], pointer["rolled_back_from"], pointer["replaced_version"]) == \
        (1, "rollback", 2, 2)
    assert served_now(serving) == (1, "one") and resolve_latest(serving) == model_location(serving, 1)
    assert resolve_model_reference(LATEST, serving, stale_model) == model_location(serving, 1)  # the baseline
    # A model gated against version 2 no longer replaces anything: the served model changed (retryable).
    assert shardflow_main(_push_argv(stale_model, stale_evaluation, serving)) == 75
    assert served_now(serving) == (1, "one") and _versions(serving) == ["1", "2"]
    assert shardflow_main(["rollback", "--serving-dir", serving, "--version", "7"]) == 2  # never served
    assert _push(root, serving, "three") == 0  # gated against version 1, served again: version 3
    assert served_now(serving) == (3, "three") and read_pointer(serving)["replaced_version"] == 1
    assert shardflow_main(["rollback", "--serving-dir", serving, "--version", "2"]) == 0  # any served version
    assert served_now(serving) == (2, "two")
