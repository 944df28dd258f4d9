"""A minimal valid ExampleGenConfig for tests that only exercise options."""
from __future__ import annotations

from pathlib import Path

from shardflow.example_gen.config import ExampleGenConfig, IndexSpec


def minimal_config(tmp_path: Path, **options: object) -> ExampleGenConfig:
    """A one-column index and an empty data root under tmp_path, with `options` on top."""
    index = tmp_path / "i.csv"
    if not index.exists():
        index.write_text("x\n")
    (tmp_path / "root").mkdir(exist_ok=True)
    return ExampleGenConfig(indexes=(IndexSpec(str(index)),), data_root=str(tmp_path / "root"),
                            output=str(tmp_path / "out"), **options)  # type: ignore[arg-type]
