"""Transform on real ExampleGen output: analyzers equal numpy, graph equals materialized output, labels, masks.

Two small datasets (40 rows of 8x8 PNGs each) go through ExampleGen once per module; Transform runs
five times in all (each run costs seconds): RGB default; RGB with a user preprocessing_fn on the
multi-process FnApiRunner; string labels + PNG storage + masks default; then two runs that must fail.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import tensorflow as tf
import tensorflow_transform as tft

from shardflow.cli import main as cli_main
from shardflow.core.example_rows import read_example_rows
from shardflow.core.manifest import FeatureSpec, IncompleteOutputError, read_manifest
from shardflow.core.pixel_codec import decode_pixels
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.core.reader import feature_spec, shard_files
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.core.hashing import sha256_of
from shardflow.transform import ConfigError, OutOfRangeError, TransformConfig, run
from shardflow.transform.materialize import check_range, stored_values
from shardflow.transform.output_features import output_feature
from shardflow.core.statistics_io import read_statistics
from shardflow.core.user_module import load_function

from helpers_images import write_csv, write_png
from helpers_transform import read_transformed

TRAIN, EVAL = 32, 8
WORDS = ["cat", "dog", "bird", "cat"]
USER_MODULE = '''
import tensorflow as tf
import tensorflow_transform as tft

def preprocessing_fn(inputs):
    pixels = tf.cast(tf.reshape(tf.io.decode_raw(inputs["x"], tf.uint8), [-1, 8, 8, 3]), tf.float32)
    return {"x01": tft.scale_to_0_1(pixels), "y_shift": inputs["y"] + 100, "site": inputs["site"]}
'''


def _ingest(root: Path, rows: list[list[object]], header: list[str], out: Path, **options: object) -> Path:
    write_csv(root / "train.csv", header, rows[:TRAIN])
    write_csv(root / "eval.csv", header, rows[TRAIN:])
    indexes = tuple(IndexSpec(str(root / f"{s}.csv"), s) for s in ("train", "eval"))
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(root), output=str(out), **options), echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def rgb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """RGB 8x8 PNGs, channel ranges differ; eval is brighter than train. Columns x (image), y (label), site."""
    root, rng = tmp_path_factory.mktemp("rgb"), np.random.default_rng(3)
    rows = []
    for i in range(TRAIN + EVAL):
        low = np.array([0, 50, 200]) + (40 if i >= TRAIN else 0)
        pixels = np.clip(rng.integers(0, 55, size=(8, 8, 3)) + low, 0, 255).astype(np.uint8)
        write_png(root / f"img/{i}.png", pixels)
        rows.append([f"img/{i}.png", i % 4, f"site-{'ab'[i % 2]}"])
    return _ingest(root, rows, ["x", "y", "site"], tmp_path_factory.mktemp("rgb_out") / "examples")


@pytest.fixture(scope="module")
def words(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """GZIP shards of PNG-stored gray images, masks with ids 0..2, string labels; 3 eval rows have 'fish'."""
    root, rng = tmp_path_factory.mktemp("words"), np.random.default_rng(5)
    rows = []
    for i in range(TRAIN + EVAL):
        write_png(root / f"img/{i}.png", rng.integers(0, 256, size=(8, 8, 1), dtype=np.uint8))
        write_png(root / f"seg/{i}_mask.png", rng.integers(0, 3, size=(8, 8, 1), dtype=np.uint8))
        label = "fish" if i >= TRAIN + EVAL - 3 else WORDS[i % 4]
        rows.append([f"img/{i}.png", f"seg/{i}_mask.png", label])
    out = tmp_path_factory.mktemp("words_out") / "examples"
    return _ingest(root, rows, ["image", "mask", "label"], out, storage=(("image", "png"),), compression="GZIP")


@pytest.fixture(scope="module")
def rgb_out(rgb: Path) -> Path:
    out = rgb.parent / "transformed"
    run(TransformConfig(examples=str(rgb), output=str(out)), echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def user_out(rgb: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    module = tmp_path_factory.mktemp("user") / "prep.py"
    module.write_text(USER_MODULE)
    out = rgb.parent / "user"
    run(TransformConfig(examples=str(rgb), output=str(out), preprocessing=f"{module}:preprocessing_fn",
                        num_shards=2, batch_size=5,
                        beam_args=("--direct_running_mode=multi_processing", "--direct_num_workers=2")),
        echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def words_out(words: Path) -> tuple[Path, list[str]]:
    out, lines = words.parent / "transformed", []
    run(TransformConfig(examples=str(words), output=str(out)), echo=lines.append)
    return out, lines


def _read(directory: Path, split: str) -> dict[str, np.ndarray]:
    batches = list(build_stream(directory, split, StreamOptions(batch_size=64)))
    return {name: np.concatenate([b[name].numpy() for b in batches]) for name in batches[0]}


def _channel_stats(pixels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = pixels.astype(np.float64).reshape(-1, pixels.shape[-1])
    return flat.mean(axis=0), flat.std(axis=0)


def test_analyzer_mean_and_std_equal_numpy_over_train(rgb: Path, rgb_out: Path) -> None:
    graph = tft.TFTransformOutput(str(rgb_out / "transform_graph"))
    # x is (pixel - mean) / std per channel: an all-0 and an all-255 image reveal mean and std.
    probe = graph.transform_raw_features({"x": tf.constant([bytes(192), bytes([255]) * 192]),
                                          "y": tf.constant([0, 0], tf.int64), "site": tf.constant(["a", "a"])})
    zero, full = probe["x"].numpy()[:, 0, 0, :].astype(np.float64)
    std = 255.0 / (full - zero)
    mean, numpy_std = _channel_stats(_read(rgb, "train")["x"])
    np.testing.assert_allclose(-zero * std, mean, rtol=1e-5)
    np.testing.assert_allclose(std, numpy_std, rtol=1e-5)


def test_every_split_is_standardized_with_train_statistics(rgb: Path, rgb_out: Path) -> None:
    mean, std = _channel_stats(_read(rgb, "train")["x"])
    for split in ("train", "eval"):
        raw, out = _read(rgb, split)["x"], read_transformed(rgb_out, split)["x"]
        assert out.dtype == np.float32 and out.shape == (raw.shape[0], 8, 8, 3)
        np.testing.assert_allclose(out, (raw - mean) / std, atol=1e-5)
    eval_mean, eval_std = _channel_stats(_read(rgb, "eval")["x"])
    own = (_read(rgb, "eval")["x"] - eval_mean) / eval_std
    assert np.abs(own - read_transformed(rgb_out, "eval")["x"]).max() > 0.5  # eval's own statistics would differ


def test_transform_graph_on_raw_records_equals_materialized_output(rgb: Path, rgb_out: Path) -> None:
    graph = tft.TFTransformOutput(str(rgb_out / "transform_graph"))
    source = read_manifest(rgb)
    for split in ("train", "eval"):
        records = tf.data.TFRecordDataset(shard_files(rgb, source, split)).batch(64)
        applied = [graph.transform_raw_features(tf.io.parse_example(r, feature_spec(source))) for r in records]
        stored = read_transformed(rgb_out, split)
        for name in ("x", "y", "site"):
            np.testing.assert_array_equal(np.concatenate([a[name].numpy() for a in applied]), stored[name])
        np.testing.assert_array_equal(stored["site"], _read(rgb, split)["site"])  # metadata unchanged


def test_manifest_statistics_and_layout(rgb: Path, rgb_out: Path) -> None:
    manifest = read_manifest(rgb_out)
    features = {n: (f.dtype, f.shape, f.encoding, f.role) for n, f in manifest.features.items()}
    # The image stays ExampleGen's stored bytes; its standardization runs where it is read.
    assert features == {"x": ("uint8", [8, 8, 3], "raw", "image"), "y": ("int64", [], "value", "label"),
                        "site": ("string", [], "value", "metadata")}
    assert manifest.extra["applied_at_read"] == ["x"]
    np.testing.assert_array_equal(_read(rgb_out, "eval")["x"], _read(rgb, "eval")["x"])
    size = manifest.extra["size"]
    assert size["input_bytes"] == sum(s.bytes for i in read_manifest(rgb).splits.values() for s in i.shards)
    assert size["bytes"] == sum(s.bytes for i in manifest.splits.values() for s in i.shards)
    assert size["ratio"] <= 1.5
    assert manifest.extra["component"] == "transform" and manifest.extra["preprocessing"] == "default"
    assert manifest.extra["inputs"][0]["sha256"] == sha256_of(str(rgb / "manifest.json"))
    assert {s: i.num_examples for s, i in manifest.splits.items()} == {"train": TRAIN, "eval": EVAL}
    assert manifest.splits["eval"].label_counts == {"y": {"0": 2, "1": 2, "2": 2, "3": 2}}
    assert not (rgb_out / ".staging").exists()
    for split in ("train", "eval"):
        stats = read_statistics(str(rgb_out / manifest.extra["statistics"][split])).datasets[0]
        assert stats.num_examples == manifest.splits[split].num_examples
        # Transformed values only: no pass-through columns; the image is described by ExampleGen's statistics.
        assert sorted(f.path.step[0] for f in stats.features) == ["site", "y"]


def test_user_preprocessing_fn_on_multi_process_runner(rgb: Path, user_out: Path) -> None:
    manifest = read_manifest(user_out)
    assert manifest.extra["preprocessing"].endswith("prep.py:preprocessing_fn")
    assert "multi_processing" in manifest.extra["runner"]
    assert {n: f.role for n, f in manifest.features.items()} == {"x01": "image", "y_shift": "metadata",
                                                                  "site": "metadata"}
    train = _read(rgb, "train")["x"].astype(np.float64)
    low, high = train.min(), train.max()
    for split in ("train", "eval"):
        assert len(manifest.splits[split].shards) == 2
        raw, out = _read(rgb, split), _read(user_out, split)  # input order kept across batches and shards
        np.testing.assert_allclose(out["x01"], (raw["x"] - low) / (high - low), atol=1e-6)
        np.testing.assert_array_equal(out["y_shift"], raw["y"] + 100)


def test_the_transformed_examples_keep_their_rows(rgb: Path, user_out: Path) -> None:
    """Transform copies its input's row provenance: each transformed example (batches of 5 over 2
    processes, 2 shards) is named by the CSV row whose label and site it holds."""
    manifest = read_manifest(user_out)
    assert manifest.extra["provenance"]["eval"] == [{"file": "provenance/eval.npz", "examples": EVAL}]
    for split in ("train", "eval"):
        rows, out = read_example_rows(user_out, manifest, split), _read(user_out, split)
        number = np.array([int(path[4:-4]) for path in rows.paths])  # img/<i>.png
        np.testing.assert_array_equal(out["y_shift"], number % 4 + 100)
        assert out["site"].tolist() == [f"site-{'ab'[i % 2]}".encode() for i in number]
        assert rows.indexes == tuple(i["path"] for i in read_manifest(rgb).extra["inputs"])
        assert {rows.indexes[i] for i in rows.index_id}.pop().endswith(f"{split}.csv")
        assert rows.row.tolist() == list(range(1, len(rows) + 1))


def test_string_labels_get_a_vocabulary_and_unseen_labels_are_reported(words: Path, words_out: tuple) -> None:
    out, lines = words_out
    manifest = read_manifest(out)
    vocab = manifest.extra["vocabularies"]["label"]
    values = (out / vocab["file"]).read_text().split()
    assert sorted(values) == ["bird", "cat", "dog"] and vocab["oov_id"] == 3 and vocab["num_classes"] == 4
    for split in ("train", "eval"):
        raw, ids = _read(words, split)["label"], _read(out, split)["label"]
        names = [values[i] if i < len(values) else "<unseen>" for i in ids]
        assert names == [r.decode() if r.decode() in values else "<unseen>" for r in raw]
    assert manifest.extra["unseen_labels"] == {"eval": {"label": 3}}
    assert manifest.splits["eval"].label_counts["label"][str(vocab["oov_id"])] == 3
    printed = "\n".join(lines).splitlines()
    assert any(line.startswith("WARNING") and "3 examples of 'label'" in line for line in printed)


def test_png_images_and_masks(words: Path, words_out: tuple) -> None:
    out, _ = words_out
    manifest = read_manifest(out)
    assert manifest.features["mask"].dtype == "uint8" and manifest.extra["mask_classes"] == {"mask": 3}
    # Ids unchanged by the default preprocessing: kept as ExampleGen stored them, range-checked when written.
    assert manifest.features["mask"] == read_manifest(words).features["mask"]
    assert manifest.extra["applied_at_read"] == ["image", "mask"]
    assert manifest.compression == "GZIP" and manifest.splits["train"].shards[0].path.endswith(".tfrecord.gz")
    mean, std = _channel_stats(_read(words, "train")["image"])
    for split in ("train", "eval"):
        raw, stored = _read(words, split), read_transformed(out, split)
        np.testing.assert_array_equal(stored["mask"], raw["mask"])
        np.testing.assert_allclose(stored["image"], (raw["image"] - mean) / std, atol=1e-5)


def test_unseen_labels_fail_policy_writes_no_manifest(words: Path, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "fail"
    code = cli_main(["transform", "--examples", str(words), "--output", str(out), "--unseen-labels", "fail"])
    assert code == 1
    assert "split eval: 3 examples of 'label'" in capsys.readouterr().err
    assert not (out / "manifest.json").exists() and not (out / ".staging").exists()


def test_mask_id_beyond_mask_classes_fails_and_rerun_leaves_nothing_complete(words: Path, words_out: tuple,
                                                                             tmp_path: Path) -> None:
    out = tmp_path / "rerun"
    shutil.copytree(words_out[0], out)  # a complete earlier output, rerun into
    with pytest.raises(Exception, match=r"feature 'mask' has value 2 outside \[0, 1\]"):
        run(TransformConfig(examples=str(words), output=str(out), mask_classes=(("mask", 2),)), echo=lambda _: None)
    with pytest.raises(IncompleteOutputError):
        build_stream(out, "train", StreamOptions(batch_size=4))
    assert not (out / ".staging").exists()


def test_config_errors_name_the_bad_value(rgb: Path, tmp_path: Path) -> None:
    cases = [({"preprocessing": "no_function_here"}, "MODULE:FUNCTION"), ({"unseen_labels": "skip"}, "'skip'"),
             ({"output": str(rgb)}, "apart from examples"), ({"num_shards": 0}, "num_shards"),
             ({"mask_classes": (("mask", 0),)}, "mask_classes of 'mask'")]
    for options, message in cases:
        with pytest.raises(ConfigError, match=message):
            TransformConfig(**{"examples": str(rgb), "output": str(tmp_path / "o"), **options})
    with pytest.raises(ConfigError, match="not masks"):
        run(TransformConfig(examples=str(rgb), output=str(tmp_path / "o"), mask_classes=(("x", 3),)))
    with pytest.raises(ConfigError, match="no attribute 'nope'"):
        run(TransformConfig(examples=str(rgb), output=str(tmp_path / "o"), preprocessing="json:nope"))
    assert load_function("json", "dumps") is json.dumps
    assert not (tmp_path / "o").exists()  # refused before anything was written


def test_unstorable_outputs_and_range_checks() -> None:
    with pytest.raises(ConfigError, match=r"shape \[5\]"):
        output_feature("v", tf.io.FixedLenFeature([5], tf.float32), None)
    with pytest.raises(ConfigError, match="variable length"):
        output_feature("v", tf.io.VarLenFeature(tf.int64), None)
    check_range(np.array([[0, 2], [1, 1]]), 0, 2, "mask domain", "m", "eval", 10)
    with pytest.raises(OutOfRangeError, match="example 11: feature 'm' has value 3"):
        check_range(np.array([[0, 2], [1, 3]]), 0, 2, "mask domain", "m", "eval", 10)


def test_mask_ids_a_user_graph_returns_are_stored_as_png() -> None:
    """A mask output the default preprocessing did not keep as stored bytes: PNG of the mask's dtype, not int64."""
    source = FeatureSpec("m", "uint8", [2, 2, 1], "raw", "mask")
    spec = output_feature("m", tf.io.FixedLenFeature([2, 2, 1], tf.int64), source)
    assert (spec.dtype, spec.encoding, spec.role) == ("uint8", "png", "mask")
    ids = pa.array([[0, 1, 2, 1], [2, 2, 0, 0]], pa.large_list(pa.int64()))
    values = stored_values(pa.RecordBatch.from_arrays([ids], ["m"]), spec, (0, 2), "train", 0)
    assert decode_pixels(values[1][0], "png", "uint8", (2, 2, 1)).ravel().tolist() == [2, 2, 0, 0]
    with pytest.raises(OutOfRangeError, match="example 0: feature 'm' has value 2"):
        stored_values(pa.RecordBatch.from_arrays([ids], ["m"]), spec, (0, 1), "train", 0)
