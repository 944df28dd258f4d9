"""Validation and Transform with every input and output on a real S3 server (moto, loopback), and on gs://.

One tiny dataset (16 gray 8x8 PNGs with 3-class masks and string labels; two eval rows say "fish",
never seen in train) goes through ExampleGen twice: to a local folder and to s3://. Validation and
Transform then read s3:// and write s3:// from an empty working directory; the transformed shards
must equal those of the same run on local disk, byte for byte.
"""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow_transform as tft

from shardflow.cli import main as cli_main
from shardflow.core import storage
from shardflow.core.example_rows import read_example_rows
from shardflow.core.manifest import read_manifest
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.transform import TransformConfig, run

from helpers_images import write_csv, write_png

TRAIN, EVAL = 12, 4
USER_MODULE = '''
import tensorflow as tf

def preprocessing_fn(inputs):
    return {"letters": tf.cast(tf.strings.length(inputs["label"]), tf.int64)}
'''


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("s3data"), np.random.default_rng(7)
    rows = []
    for i in range(TRAIN + EVAL):
        write_png(root / f"img/{i}.png", rng.integers(0, 256, size=(8, 8, 1), dtype=np.uint8))
        write_png(root / f"seg/{i}.png", rng.integers(0, 3, size=(8, 8, 1), dtype=np.uint8))
        rows.append([f"img/{i}.png", f"seg/{i}.png", "fish" if i >= TRAIN + EVAL - 2 else ["cat", "dog"][i % 2]])
    write_csv(root / "train.csv", ["image", "mask", "label"], rows[:TRAIN])
    write_csv(root / "eval.csv", ["image", "mask", "label"], rows[TRAIN:])
    return root


def _example_gen(data: Path, output: str) -> str:
    indexes = tuple(IndexSpec(str(data / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(data), output=output, storage=(("image", "png"),)),
                echo=lambda _: None)
    return output


@pytest.fixture(scope="module")
def local_runs(data: Path) -> tuple[str, str]:
    """ExampleGen and Transform on local disk: the reference."""
    examples = _example_gen(data, str(data.parent / "local_examples"))
    transformed = str(data.parent / "local_transform")
    run(TransformConfig(examples=examples, output=transformed), echo=lambda _: None)
    return examples, transformed


@pytest.fixture(scope="module")
def bucket(s3_server) -> str:  # noqa: ANN001  (the session's S3Server)
    return s3_server.bucket()


@pytest.fixture(scope="module")
def s3_examples(data: Path, bucket: str) -> str:
    return _example_gen(data, f"s3://{bucket}/examples")


@pytest.fixture(scope="module")
def s3_transformed(s3_examples: str, bucket: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, list[str]]:
    """`shardflow transform` from s3:// to s3://, run in an empty working directory; (output, what it left there)."""
    work, out = tmp_path_factory.mktemp("cwd"), f"s3://{bucket}/transform"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)
        assert cli_main(["transform", "--examples", s3_examples, "--output", out]) == 0
    return out, os.listdir(work)


def _shards(root: str) -> dict[str, bytes]:
    manifest = read_manifest(root)
    return {f"{split}/{shard.path.rsplit('/', 1)[1]}": storage.read_bytes(storage.join(root, *shard.path.split("/")))
            for split, info in manifest.splits.items() for shard in info.shards}


def test_validate_on_s3(s3_examples: str, bucket: str, s3_server, empty_cwd: Path,  # noqa: ANN001
                        capsys: pytest.CaptureFixture[str]) -> None:
    validation = f"s3://{bucket}/validation"
    assert cli_main(["validate", "--examples", s3_examples, "--output", validation, "--warn-only"]) == 0
    report = storage.read_json(storage.join(validation, "anomalies.json"))
    assert report["passed"] is False  # "fish" is outside train's label domain
    assert any(a["feature"] == "label" for a in report["splits"]["eval"]["anomalies"])
    assert s3_server.keys(bucket, "validation/") == [
        "validation/anomalies.json", "validation/report.html", "validation/report.md",
        "validation/tfdv/anomalies_eval.pbtxt", "validation/tfdv/anomalies_train.pbtxt", "validation/tfdv/schema.pbtxt"]
    # A curated schema on s3 that admits "fish": the same data passes; a missing one is a one-line error.
    schema = storage.read_text(f"{s3_examples}/schema.pbtxt").replace('value: "dog"', 'value: "dog"\n    value: "fish"')
    storage.write_text(f"s3://{bucket}/curated/schema.pbtxt", schema)
    assert cli_main(["validate", "--examples", s3_examples, "--output", f"s3://{bucket}/validation2",
                     "--schema", f"s3://{bucket}/curated/schema.pbtxt", "--no-drift", "label"]) == 0
    assert storage.read_json(f"s3://{bucket}/validation2/anomalies.json")["passed"] is True
    assert cli_main(["validate", "--examples", s3_examples, "--output", f"s3://{bucket}/validation3",
                     "--schema", f"s3://{bucket}/curated/nope.pbtxt"]) == 2
    assert f"schema 's3://{bucket}/curated/nope.pbtxt' is not a file" in capsys.readouterr().err
    assert s3_server.keys(bucket, "validation3/") == []
    assert os.listdir(empty_cwd) == []  # nothing written locally


def test_transform_on_s3_equals_the_local_run(s3_examples: str, s3_transformed: tuple[str, list[str]],
                                              local_runs: tuple[str, str], bucket: str, s3_server) -> None:  # noqa: ANN001
    transformed, left_in_cwd = s3_transformed
    assert left_in_cwd == []  # nothing written locally
    keys = s3_server.keys(bucket, "transform/")
    assert "transform/manifest.json" in keys and not [k for k in keys if "/.staging" in k or ".tmp" in k]
    assert _shards(transformed) == _shards(local_runs[1])  # byte-identical to the local run
    manifest = read_manifest(transformed)
    assert manifest.extra["unseen_labels"] == {"eval": {"label": 2}}
    assert manifest.extra["inputs"][0]["path"] == f"{s3_examples}/manifest.json"
    graph = tft.TFTransformOutput(f"{transformed}/transform_graph")  # what the Trainer loads
    assert sorted(graph.transformed_feature_spec()) == ["image", "label", "mask"]
    assert sorted(v.decode() for v in graph.vocabulary_by_name("vocab_label")) == ["cat", "dog"]
    assert storage.read_text(storage.join(transformed, manifest.extra["vocabularies"]["label"]["file"])).split()
    for split in manifest.splits:  # the input's example rows, copied from bucket to bucket
        assert f"transform/provenance/{split}.npz" in keys
        rows, source = (read_example_rows(d, read_manifest(d), split) for d in (transformed, s3_examples))
        assert rows.row.tolist() == source.row.tolist() and list(rows.paths) == list(source.paths)


def test_rerun_with_a_module_from_s3_replaces_every_split(s3_examples: str, s3_transformed: tuple[str, list[str]],
                                                          bucket: str, s3_server, empty_cwd: Path) -> None:  # noqa: ANN001
    out = f"s3://{bucket}/rerun"
    storage.copy_tree(s3_transformed[0], out)  # a complete earlier output, plus items no rerun writes:
    storage.write_text(f"{out}/Split-stale/data-00000-of-00001.tfrecord", "from a run with another split")
    storage.write_text(f"{out}/Split-train/data-00007-of-00009.tfrecord", "from a run with more shards")
    module = f"s3://{bucket}/code/prep.py"
    storage.write_text(module, USER_MODULE)
    run(TransformConfig(examples=s3_examples, output=out, preprocessing=f"{module}:preprocessing_fn", num_shards=1),
        echo=lambda _: None)
    manifest = read_manifest(out)
    assert list(manifest.features) == ["letters"]
    listed = {storage.join(out, *s.path.split("/")) for info in manifest.splits.values() for s in info.shards}
    stored = {f"s3://{bucket}/{k}" for k in s3_server.keys(bucket, "rerun/Split-")}
    assert listed == stored and len(stored) == 2  # one shard per split, no stale shard or split
    assert not storage.exists(f"{out}/transform_graph/transform_fn/assets/vocab_label")  # the old graph is gone
    assert os.listdir(empty_cwd) == []


def test_failed_rerun_leaves_no_manifest(s3_examples: str, s3_transformed: tuple[str, list[str]], bucket: str,
                                         s3_server, empty_cwd: Path, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: ANN001
    out = f"s3://{bucket}/failing"
    storage.copy_tree(s3_transformed[0], out)  # a complete earlier output, rerun into
    assert storage.is_file(f"{out}/manifest.json")
    code = cli_main(["transform", "--examples", s3_examples, "--output", out, "--unseen-labels", "fail"])
    assert code == 1 and "split eval: 2 examples of 'label'" in capsys.readouterr().err
    keys = s3_server.keys(bucket, "failing/")
    assert "failing/manifest.json" not in keys and not [k for k in keys if "/.staging" in k]
    assert os.listdir(empty_cwd) == []


def test_examples_on_gcs(gcs_server, local_runs: tuple[str, str], tmp_path: Path) -> None:  # noqa: ANN001
    """gs:// takes the same code path; TensorFlow's gs:// cannot reach an emulator, so the graph stays local."""
    examples = f"gs://{gcs_server.bucket()}/examples"
    storage.copy_tree(local_runs[0], examples)
    assert cli_main(["validate", "--examples", examples, "--output", f"{examples}-validation", "--warn-only"]) == 0
    assert storage.read_json(f"{examples}-validation/anomalies.json")["num_anomalies"] > 0  # the "fish" labels
    run(TransformConfig(examples=examples, output=str(tmp_path / "from_gcs")), echo=lambda _: None)
    assert _shards(str(tmp_path / "from_gcs")) == _shards(local_runs[1])
