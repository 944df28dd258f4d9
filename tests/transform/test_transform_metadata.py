"""The transform graph is a complete TFX one: `TFTransformOutput.raw_feature_spec()` / `raw_metadata` work.

TFX user code builds its serving function from the raw spec (parse tf.Examples, then the graph's
layer). The RGB dataset of test_transform (40 rows of 8x8 PNGs: x image, y int label, site string)
goes through ExampleGen once, then Transform once to local disk and once to s3://. The checks use
the graph and the raw examples only, not how Transform stores its materialized output.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from shardflow.core.cloud_env import enable_tensorflow_filesystems
from shardflow.core.manifest import read_manifest
from shardflow.core.reader import feature_spec, shard_files
from shardflow.transform import TransformConfig, run
from shardflow.transform.raw_input import raw_schema

from test_transform import _channel_stats, _read, rgb, rgb_out  # noqa: F401  (module fixtures, re-created here)


def _records(examples: Path, split: str) -> tf.Tensor:
    """Every serialized tf.Example of the split, in one batch."""
    files = shard_files(examples, read_manifest(examples), split)
    return next(iter(tf.data.TFRecordDataset(files).batch(1000)))


def test_raw_feature_spec_is_the_raw_spec(rgb: Path, rgb_out: Path) -> None:  # noqa: F811
    graph = tft.TFTransformOutput(str(rgb_out / "transform_graph"))
    source = read_manifest(rgb)
    assert graph.raw_feature_spec() == feature_spec(source)
    assert graph.raw_metadata.schema == raw_schema(source)
    assert (rgb_out / "transform_graph" / tft.TFTransformOutput.RAW_METADATA_DIR / "schema.pbtxt").is_file()
    assert not (rgb_out / ".staging").exists()


def test_serving_function_built_from_the_raw_spec(rgb: Path, rgb_out: Path) -> None:  # noqa: F811
    """As TFX's serving functions do: parse with the raw spec (label removed), apply the graph's layer."""
    graph = tft.TFTransformOutput(str(rgb_out / "transform_graph"))
    serialized, raw = _records(rgb, "eval"), _read(rgb, "eval")
    applied = graph.transform_raw_features(tf.io.parse_example(serialized, graph.raw_feature_spec()))
    mean, std = _channel_stats(_read(rgb, "train")["x"])
    np.testing.assert_allclose(applied["x"].numpy(), (raw["x"] - mean) / std, atol=1e-5)  # train's statistics
    np.testing.assert_array_equal(applied["site"].numpy(), raw["site"])
    spec = graph.raw_feature_spec()
    spec.pop("y")
    served = graph.transform_features_layer()(tf.io.parse_example(serialized, spec))
    assert "y" not in served
    np.testing.assert_array_equal(served["x"].numpy(), applied["x"].numpy())


def test_raw_metadata_on_s3(rgb: Path, s3_bucket: str, empty_cwd: Path) -> None:  # noqa: F811
    """On an object store the graph is written in place (no staging rename): the metadata must be there too."""
    out = f"s3://{s3_bucket}/transform"
    run(TransformConfig(examples=str(rgb), output=out, num_shards=1), echo=lambda _: None)
    enable_tensorflow_filesystems([out])
    graph = tft.TFTransformOutput(f"{out}/transform_graph")
    assert graph.raw_feature_spec() == feature_spec(read_manifest(rgb))
