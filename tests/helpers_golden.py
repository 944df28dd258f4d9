"""Golden files: a run's outputs, made comparable text by the test, against the files a past run wrote.

The tests that pin a component's outputs per task kind (issue 68: tests/evaluator/test_task_outputs.py,
tests/serving/test_infra_task_outputs.py, test_predict_task_outputs.py) keep one folder per case, one file
per output, and regenerate them only for an intended change (say why in the commit): SHARDFLOW_WRITE_GOLDEN=1
pytest the test's file.
"""
from __future__ import annotations

import os
from pathlib import Path

WRITE = os.environ.get("SHARDFLOW_WRITE_GOLDEN") == "1"


def compare_golden(golden: Path, found: dict[str, str]) -> None:
    """`found` (output name → comparable text) equals the files of the folder `golden` (rewritten first with
    SHARDFLOW_WRITE_GOLDEN=1), each difference named by its golden file."""
    if WRITE:
        golden.mkdir(parents=True, exist_ok=True)
        for old in golden.iterdir():
            old.unlink()
        for name, text in found.items():
            (golden / name).write_text(text)
    expected = {path.name: path.read_text() for path in sorted(golden.iterdir())}
    assert sorted(found) == sorted(expected), f"{golden.name}: the outputs differ in name"
    for name, text in expected.items():
        assert found[name] == text, f"{golden.name}/{name} differs from {golden / name}"
