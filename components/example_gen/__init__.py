"""ExampleGen: CSV indexes of image files and labels → checked, decoded-once, sharded TFRecords.

    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
    manifest = run(ExampleGenConfig(indexes=(IndexSpec("d/train.csv", "train"),), data_root="d", output="out"))
"""
from .config import ConfigError, ExampleGenConfig, IndexSpec
from .executor import TooManyRejectsError, run

__all__ = ["ConfigError", "ExampleGenConfig", "IndexSpec", "TooManyRejectsError", "run"]
