"""ImageExampleGen's executor on its own, with GZIP shards and a hash split, read by TFX's StatisticsGen executor."""
from __future__ import annotations

import json
from pathlib import Path

from helpers_tfx import write_images


def test_gzip_hash_split_artifact_is_read_by_statistics_gen(tmp_path: Path):
    import tensorflow_data_validation as tfdv
    from tfx.components.statistics_gen import executor as statistics_gen
    from tfx.types import standard_artifacts

    from shardflow.tfx import Executor
    from shardflow.tfx.options import encode

    index = write_images(tmp_path / "data", 40)
    examples = standard_artifacts.Examples()
    examples.uri = str(tmp_path / "examples")
    Executor().Do({}, {"examples": [examples]}, {
        "index": encode(str(index)), "data_root": str(tmp_path / "data"),
        "options": encode(["--gzip", "--split", "train=3", "--split", "eval=1", "--max-reject-fraction", "0.1"])})

    assert json.loads(examples.split_names) == ["train", "eval"]
    assert examples.get_string_custom_property("payload_format") == "FORMAT_TF_EXAMPLE"
    assert examples.get_string_custom_property("compression") == "GZIP"
    counts = {s: examples.get_int_custom_property(f"examples_{s}") for s in ("train", "eval")}
    assert sum(counts.values()) == examples.get_int_custom_property("accepted") == 40
    assert examples.get_int_custom_property("rejected") == 1
    assert len((tmp_path / "examples/rejects.jsonl").read_text().splitlines()) == 1
    shards = sorted(p.name for p in (tmp_path / "examples/Split-train").iterdir())
    assert shards and all(name.endswith(".tfrecord.gz") for name in shards)

    statistics = standard_artifacts.ExampleStatistics()
    statistics.uri = str(tmp_path / "statistics")
    statistics_gen.Executor().Do({"examples": [examples]}, {"statistics": [statistics]}, {"exclude_splits": "[]"})
    for split, count in counts.items():
        stats = tfdv.load_stats_binary(str(tmp_path / "statistics" / f"Split-{split}" / "FeatureStats.pb"))
        assert stats.datasets[0].num_examples == count  # TFX found the compression from the .gz suffix
