"""Unit tests of ExampleGen's config validation and the CLI flag translation."""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers_config import minimal_config
from shardflow.cli import build_parser
from shardflow.cli import main as shardflow_main
from shardflow.example_gen.cli import config_from_args
from shardflow.example_gen.config import ConfigError, ExampleGenConfig, IndexSpec

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

# ---------------------------------------------------------------- config and CLI

@pytest.mark.parametrize("options, message", [
    ({"compression": "ZIP"}, "compression must be one of .* got 'ZIP'"),
    ({"shard_size_mb": 0.0}, "shard_size_mb must be > 0, got 0.0"),
    ({"num_shards": 0}, "num_shards must be >= 1, got 0"),
    ({"min_shards": 0}, "min_shards must be >= 1, got 0"),
    ({"max_reject_fraction": 1.5}, r"max_reject_fraction must be within \[0, 1\], got 1.5"),
    ({"max_pixels": 0}, "max_pixels must be >= 1, got 0"),
    ({"rows_per_chunk": 0}, "rows_per_chunk must be >= 1, got 0"),
    ({"split_weights": (("train", 9), ("train", 1))}, "unique .* \\['train', 'train'\\]"),
    ({"split_weights": (("tr ain", 9),)}, "split name 'tr ain'"),
    ({"split_weights": (("train", 0),)}, "split weight of 'train' must be >= 1, got 0"),
    ({"roles": (("y", "target"),)}, "role of column 'y' .* got 'target'"),
    ({"resize": (("img", (0, 28)),)}, "resize of 'img' must be positive HxW, got 0x28"),
    ({"channels": (("*", "cmyk"),)}, "channels of '\\*' .* got 'cmyk'"),
    ({"storage": (("img", "webp"),)}, "storage of 'img' .* got 'webp'"),
])
def test_config_errors_name_the_bad_value(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        minimal_config(tmp_path, **options)


def test_config_errors_about_paths_and_indexes(tmp_path: Path) -> None:
    base = minimal_config(tmp_path)
    index, root = base.indexes[0].path, base.data_root
    value_cases = [
        (dict(indexes=(IndexSpec(index, "train"), IndexSpec(index))), "all name a split"),
        (dict(indexes=(IndexSpec(index), IndexSpec(index))), "name their splits"),
        (dict(indexes=()), "at least one --index"),
        (dict(indexes=(IndexSpec(index, "train"),), split_key="patient"), "--split-key applies only"),
    ]
    # Checks that touch files happen when the run starts, not when the config is built.
    location_cases = [
        (dict(indexes=(IndexSpec(str(tmp_path / "nope.csv")),)), "index file '.*nope.csv' does not exist"),
        (dict(data_root=str(tmp_path / "i.csv")), "data_root '.*i.csv' is not a directory"),
        (dict(output=root), "would contain or replace data_root"),
        (dict(output=str(tmp_path)), "would contain or replace data_root"),
    ]
    fields = {"indexes": base.indexes, "data_root": root, "output": base.output}
    for change, message in value_cases:
        with pytest.raises(ConfigError, match=message):
            ExampleGenConfig(**{**fields, **change})  # type: ignore[arg-type]
    for change, message in location_cases:
        config = ExampleGenConfig(**{**fields, **change})  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match=message):
            config.check_inputs()
    missing = ExampleGenConfig(**{**fields, "indexes": (IndexSpec(str(tmp_path / "nope.csv")),)})  # type: ignore[arg-type]
    assert shardflow_main(["example-gen", "--index", missing.indexes[0].path, "--data-root", root,
                           "--output", base.output]) == 2  # run() checks first: one line, exit 2
    assert not Path(base.output).exists()


def test_index_spec_and_per_column_values() -> None:
    assert IndexSpec.parse("train=d/train.csv") == IndexSpec("d/train.csv", "train")
    assert IndexSpec.parse("d/all.csv") == IndexSpec("d/all.csv", None)
    assert IndexSpec.parse("d/a=b.csv") == IndexSpec("d/a=b.csv", None)  # "d/a" is not a split name
    table = (("*", "png"), ("seg", "raw"))
    assert ExampleGenConfig.per_column(None, table, "seg", "x") == "raw"  # type: ignore[arg-type]
    assert ExampleGenConfig.per_column(None, table, "img", "x") == "png"  # type: ignore[arg-type]
    assert ExampleGenConfig.per_column(None, (), "img", "x") == "x"  # type: ignore[arg-type]


def _from_cli(tmp_path: Path, *flags: str):
    base = minimal_config(tmp_path)
    argv = ["example-gen", "--index", base.indexes[0].path, "--data-root", base.data_root, "--output", base.output, *flags]
    args, extra = build_parser().parse_known_args(argv)
    return config_from_args(args, extra)


def test_cli_flags_translate_into_theminimal_config(tmp_path: Path) -> None:
    defaults = _from_cli(tmp_path)
    assert defaults == minimal_config(tmp_path)  # the CLI defaults are the config defaults
    config = _from_cli(
        tmp_path, "--split", "train=8", "--split", "eval=1", "--split", "test=1", "--split-key", "patient",
        "--role", "site=metadata", "--resize", "28x28", "--resize", "seg=14x7", "--channels", "gray",
        "--storage", "img=png", "--gzip", "--num-shards", "4", "--min-shards", "2", "--shard-size-mb", "64",
        "--max-reject-fraction", "0.2", "--max-pixels", "1000", "--rows-per-chunk", "50",
        "--runner=DirectRunner", "--direct_num_workers", "2")
    assert config.split_weights == (("train", 8), ("eval", 1), ("test", 1))
    assert config.split_key == "patient" and config.roles == (("site", "metadata"),)
    assert config.resize == (("*", (28, 28)), ("seg", (14, 7)))
    assert config.channels == (("*", "gray"),) and config.storage == (("img", "png"),)
    assert (config.compression, config.num_shards, config.min_shards, config.shard_size_mb) == ("GZIP", 4, 2, 64.0)
    assert (config.max_reject_fraction, config.max_pixels, config.rows_per_chunk) == (0.2, 1000, 50)
    assert config.beam_args == ("--runner=DirectRunner", "--direct_num_workers", "2")
    assert config.split_names == ("train", "eval", "test") and config.hash_split


def test_cli_rejects_bad_flag_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="--resize expects HxW such as 28x28, got '28'"):
        _from_cli(tmp_path, "--resize", "28")
    with pytest.raises(ConfigError, match="--split expects NAME=WEIGHT such as train=9, got 'train'"):
        _from_cli(tmp_path, "--split", "train")
    base = minimal_config(tmp_path)
    code = shardflow_main(["example-gen", "--index", base.indexes[0].path, "--data-root", base.data_root,
                           "--output", base.output, "--storage", "webp"])
    assert code == 2
    assert "shardflow example-gen: error: storage of '*' must be one of" in capsys.readouterr().err
