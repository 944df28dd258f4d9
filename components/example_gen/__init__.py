"""ExampleGen: CSV indexes of image files and labels → checked, decoded-once, sharded TFRecords.

    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
    manifest = run(ExampleGenConfig(indexes=(IndexSpec("d/train.csv", "train"),), data_root="d", output="out"))
"""
from typing import Any

from .config import ConfigError, ExampleGenConfig, IndexSpec


def __getattr__(name: str) -> Any:
    """`run` and `TooManyRejectsError` load TensorFlow and TFDV: import them only when used."""
    if name in ("run", "TooManyRejectsError"):
        from . import executor

        return getattr(executor, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["ConfigError", "ExampleGenConfig", "IndexSpec", "TooManyRejectsError", "run"]
