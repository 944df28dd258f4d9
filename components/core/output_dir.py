"""The output directory's life cycle: invalidate, stage, publish. A killed run never looks complete.

1. `prepare` removes the manifest first (the output stops being "complete"), then any staging
   left by a killed run.
2. Workers write under `<out>/.staging/`.
3. `publish` swaps each `Split-*` directory and the statistics into place, removes stale splits
   from earlier runs, and the caller writes the manifest last.
"""
from __future__ import annotations

import os
from pathlib import Path

from .atomic import remove_path
from .manifest import MANIFEST_NAME

STAGING = ".staging"


def prepare(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / MANIFEST_NAME).unlink(missing_ok=True)
    staging = out_dir / STAGING
    remove_path(staging)
    staging.mkdir()
    return staging


def publish(out_dir: Path, staging: Path, splits: tuple[str, ...]) -> None:
    """Moves the staged shards and statistics into place; removes splits not produced by this run."""
    for old in out_dir.glob("Split-*"):
        remove_path(old)
    for split in splits:
        staged = staging / f"Split-{split}"
        if staged.is_dir():
            os.replace(staged, out_dir / f"Split-{split}")
    remove_path(out_dir / "statistics")
    if (staging / "statistics").is_dir():
        os.replace(staging / "statistics", out_dir / "statistics")


def discard(staging: Path) -> None:
    remove_path(staging)
