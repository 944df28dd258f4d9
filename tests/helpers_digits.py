"""The digits demo data set as ExampleGen output, for the tests that train on it."""
from __future__ import annotations

from pathlib import Path

import pytest

from shardflow.demo_data import write_all
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen


def digits_examples(tmp_path_factory: pytest.TempPathFactory, min_shards: int = 1) -> Path:
    """scikit-learn's 1,797 digits, train and eval, through ExampleGen; returns its output."""
    demo = tmp_path_factory.mktemp("demo")
    write_all(str(demo))
    out = tmp_path_factory.mktemp("digits") / "examples"
    indexes = tuple(IndexSpec(str(demo / "digits" / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(demo / "digits"), output=str(out),
                                 min_shards=min_shards), echo=lambda _: None)
    return out
