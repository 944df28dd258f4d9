"""A model retrained into the same output is another model: Push knows what is served by content, not by path.

The user's commands, in process: train (seed 1) → evaluate → push is version 1; train again into the same
`--output` with seed 2 → evaluate against `latest` → push is version 2, with the new weights, and TF Serving's
model config names it. Before, "already served" was decided by the model's path: the second push exited 0 and
copied nothing, and the new weights were never served.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from shardflow.cli import main as shardflow_main
from shardflow.core.model_info import model_digest
from shardflow.pusher import LATEST, read_pointer, resolve_model_reference
from testkit.serving_oracle import configured

pytestmark = pytest.mark.pipeline


def _train_evaluate_push(examples: Path, out: Path, serving: Path, seed: int, name: str) -> int:
    model = out / "model"
    assert shardflow_main(["train", "--examples", str(examples), "--output", str(out), "--steps", "5",
                           "--batch-size", "32", "--seed", str(seed)]) == 0
    baseline = resolve_model_reference(LATEST, str(serving), str(model))  # as the pipeline resolves `latest`
    evaluate = ["evaluate", "--model", str(model), "--examples", str(examples), "--output", str(out.parent / name),
                "--threshold", "accuracy>=0", "--max-regression", "accuracy=1"]
    assert shardflow_main(evaluate + (["--baseline", baseline] if baseline else [])) == 0
    return shardflow_main(["push", "--model", str(model), "--evaluation", str(out.parent / name),
                           "--serving-dir", str(serving)])


def test_a_model_retrained_in_place_is_pushed_as_a_new_version(digits_examples: Path, tmp_path: Path) -> None:
    out, serving = tmp_path / "train", tmp_path / "serving"
    assert _train_evaluate_push(digits_examples, out, serving, seed=1, name="eval1") == 0
    first = model_digest(str(out / "model"))
    assert read_pointer(str(serving))["version"] == 1 and configured(str(serving)) == (str(serving / "1" / "model"), 1)
    # The rerun of the same model: already served, nothing copied.
    assert shardflow_main(["push", "--model", str(out / "model"), "--evaluation", str(tmp_path / "eval1"),
                           "--serving-dir", str(serving)]) == 0
    assert sorted(p.name for p in serving.iterdir() if p.name.isdigit()) == ["1"]
    assert _train_evaluate_push(digits_examples, out, serving, seed=2, name="eval2") == 0
    pointer = read_pointer(str(serving))
    one, two = str(serving / "1" / "model" / "1"), str(serving / "2" / "model" / "2")  # pusher/layout.py
    assert pointer["version"] == 2 and pointer["gated_against"] == one  # gated against version 1
    assert model_digest(two) == model_digest(str(out / "model")) == pointer["content_digest"] != first
    assert model_digest(one) == first  # version 1 still holds the first weights (a rollback target)
    assert configured(str(serving)) == (str(serving / "2" / "model"), 2)  # what TF Serving serves: the new weights
