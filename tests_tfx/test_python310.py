"""shardflow's ExampleGen on Python 3.10 (the TFX environment), and ImageExampleGen's translation."""
from __future__ import annotations

import doctest
import json
import sys
from pathlib import Path

import pytest

from shardflow.core.errors import ConfigError
from shardflow.tfx import options as tfx_options

from helpers_tfx import write_images


def test_runs_on_python_310():
    assert sys.version_info[:2] == (3, 10), sys.version


def test_example_gen_counts_reconcile_on_python_310(tmp_path: Path):
    from shardflow.example_gen import run

    index = write_images(tmp_path / "data", 40)
    data_lines = len(index.read_text().splitlines()) - 1  # minus the header
    config = tfx_options.example_gen_config(str(index), str(tmp_path / "data"),
                                            ["--split", "train=3", "--split", "eval=1", "--max-reject-fraction", "0.1"],
                                            str(tmp_path / "out"))
    manifest = run(config, echo=lambda _: None)
    assert manifest.extra["rows"] == data_lines == 41
    assert (manifest.extra["accepted"], manifest.extra["rejected"]) == (40, 1)
    assert sum(s.num_examples for s in manifest.splits.values()) == 40
    assert set(manifest.splits) == {"train", "eval"} and all(s.num_examples for s in manifest.splits.values())
    rejects = [json.loads(line) for line in (tmp_path / "out/rejects.jsonl").read_text().splitlines()]
    assert len(rejects) == 1 and "broken.png" in json.dumps(rejects[0])
    import tensorflow as tf

    for split, info in manifest.splits.items():
        files = sorted(str(p) for p in (tmp_path / "out" / f"Split-{split}").iterdir())
        assert sum(1 for _ in tf.data.TFRecordDataset(files)) == info.num_examples


def test_options_are_the_cli_flags():
    config = tfx_options.example_gen_config({"train": "d/a.csv", "eval": "d/b.csv"}, "d",
                                            ["--resize", "x=16x16", "--gzip", "--num-shards", "3",
                                             "--direct_num_workers=2"], "out", beam_args=["--labels", "a=b"])
    assert [(i.split, i.path) for i in config.indexes] == [("train", "d/a.csv"), ("eval", "d/b.csv")]
    assert config.resize == (("x", (16, 16)),) and config.compression == "GZIP" and config.num_shards == 3
    assert config.beam_args == ("--labels", "a=b", "--direct_num_workers=2")  # the component's own options last
    assert config.output == "out" and config.data_root == "d"


@pytest.mark.parametrize("index, options, message", [
    ("d/a.csv", ["--resise", "16x16"], "--resise is neither a shardflow example-gen option"),
    ("d/a.csv", ["--output", "elsewhere"], "must not contain --index, --data-root or --output"),
    ("d/a.csv", ["--index", "d/b.csv"], "must not contain --index"),
    ("d/a.csv", ["--data-root", "e"], "must not contain"),
    ("d/a.csv", ["--num-shards", "many"], "invalid int value: 'many'"),
    ("d/a.csv", ["--split", "train"], "--split expects NAME=WEIGHT"),
    ({}, [], "index must be a CSV path or a non-empty"),
    ({"train": 3}, [], "index must be a CSV path or a non-empty"),
    ("d/{SPAN}/a.csv", ["--span-store", "s"], "does not take span patterns"),
    ("d/a.csv", "--gzip", "options must be a list of strings"),
])
def test_mistakes_are_one_line_config_errors(index, options, message):
    with pytest.raises(ConfigError, match=None) as error:
        tfx_options.example_gen_config(index, "d", options, "out")
    assert message in str(error.value) and "\n" not in str(error.value)


def test_component_refuses_bad_options_when_the_pipeline_is_defined():
    from shardflow.tfx import ImageExampleGen

    with pytest.raises(ConfigError, match="--resise"):
        ImageExampleGen(index="d/a.csv", data_root="d", options=["--resise", "16x16"])
    component = ImageExampleGen(index={"train": "d/t.csv", "eval": "d/e.csv"}, data_root="d", options=["--gzip"])
    assert json.loads(component.exec_properties["index"]) == {"train": "d/t.csv", "eval": "d/e.csv"}
    assert json.loads(component.exec_properties["options"]) == ["--gzip"]
    from_paths = ImageExampleGen(index={"train": Path("d/t.csv")}, data_root=Path("d"))  # os.PathLike too
    assert json.loads(from_paths.exec_properties["index"]) == {"train": "d/t.csv"}
    assert from_paths.exec_properties["data_root"] == "d"


def test_adapter_docstrings_run():
    import shardflow.tfx.options

    failed, attempted = doctest.testmod(shardflow.tfx.options)
    assert attempted and not failed
