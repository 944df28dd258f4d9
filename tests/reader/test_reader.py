"""The tf.data reader on real ExampleGen output: decoded pixels equal the source files bit for bit.

ExampleGen runs twice per module (raw; png/jpeg + GZIP), each on ~20 small PNG files written here,
because every run costs several seconds. The resized segmentation set: test_reader_segmentation.py.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from shardflow.core import reader
from shardflow.core.manifest import IncompleteOutputError, read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.core.reader import decode_batch, feature_spec
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

from helpers_images import random_pixels, read_pixels, write_csv, write_png
from helpers_reader import budget_for, collect

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

HEADER = ["gray", "rgb", "depth", "gray_lossy", "rgb_lossy", "y", "site", "score"]
SPLIT_ROWS = {"train": range(0, 14), "eval": range(14, 20)}
FILE_COLUMNS = ("gray", "rgb", "depth", "gray_lossy", "rgb_lossy")


def _smooth(rng: np.random.Generator, channels: int) -> np.ndarray:
    """A gradient with mild noise: JPEG keeps it close, unlike pure noise."""
    ramp = np.add.outer(np.arange(12) * 9, np.arange(10) * 7)[:, :, None] + 40
    noise = rng.integers(0, 8, size=(12, 10, channels))
    return np.clip(ramp + noise, 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """20 rows of 12x10 uint8 L, uint8 RGB, uint16 L PNGs and values; train = rows 0-13, eval = 14-19."""
    root = tmp_path_factory.mktemp("photos")
    rng = np.random.default_rng(7)
    rows = []
    for i in range(20):
        write_png(root / f"gray/{i}.png", random_pixels(rng, (12, 10, 1)))
        write_png(root / f"rgb/{i}.png", random_pixels(rng, (12, 10, 3)))
        write_png(root / f"depth/{i}.png", random_pixels(rng, (12, 10, 1), "uint16"))
        write_png(root / f"smooth/g{i}.png", _smooth(rng, 1))
        write_png(root / f"smooth/c{i}.png", _smooth(rng, 3))
        rows.append([f"gray/{i}.png", f"rgb/{i}.png", f"depth/{i}.png", f"smooth/g{i}.png", f"smooth/c{i}.png",
                     str(i % 3), f"site-{'ab'[i % 2]}", f"{i / 4 + 0.1:.2f}"])
    for split, span in SPLIT_ROWS.items():
        write_csv(root / f"{split}.csv", HEADER, [rows[i] for i in span])
    return root


def _ingest(data: Path, out: Path, **options: object) -> Path:
    indexes = tuple(IndexSpec(str(data / f"{s}.csv"), s) for s in SPLIT_ROWS)
    run(ExampleGenConfig(indexes=indexes, data_root=str(data), output=str(out), rows_per_chunk=4, **options))
    return out


@pytest.fixture(scope="module")
def raw_out(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _ingest(photos, tmp_path_factory.mktemp("raw") / "out", num_shards=3)


@pytest.fixture(scope="module")
def coded_out(photos: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    storage = (("gray", "png"), ("rgb", "png"), ("depth", "png"), ("gray_lossy", "jpeg"), ("rgb_lossy", "jpeg"))
    return _ingest(photos, tmp_path_factory.mktemp("coded") / "out", num_shards=2, storage=storage, compression="GZIP")


def _csv_rows(data: Path, split: str) -> list[list[str]]:
    lines = (data / f"{split}.csv").read_text().splitlines()
    return [line.split(",") for line in lines[1:]]


@pytest.mark.parametrize("split", list(SPLIT_ROWS))
def test_raw_storage_decodes_bit_exact_in_csv_order(photos: Path, raw_out: Path, split: str) -> None:
    manifest = read_manifest(raw_out)
    assert len(manifest.splits[split].shards) == 3  # order across shards and chunk parts is exercised
    got = collect(build_stream(raw_out, split, StreamOptions(batch_size=4)))
    rows = _csv_rows(photos, split)
    assert len(got["y"]) == len(rows) == manifest.splits[split].num_examples
    for i, row in enumerate(rows):
        for column in FILE_COLUMNS:
            expected = read_pixels(photos / row[HEADER.index(column)])
            assert got[column][i].dtype == expected.dtype, column
            np.testing.assert_array_equal(got[column][i], expected, err_msg=f"{split} row {i + 1} {column}")
        assert got["y"][i] == int(row[5])
        assert got["site"][i].decode() == row[6]
        assert got["score"][i] == np.float32(float(row[7]))


def test_element_spec_has_static_shapes_and_dtypes(raw_out: Path) -> None:
    spec = build_stream(raw_out, "train", StreamOptions(batch_size=4)).element_spec
    assert spec["gray"] == tf.TensorSpec([None, 12, 10, 1], tf.uint8)
    assert spec["rgb"] == tf.TensorSpec([None, 12, 10, 3], tf.uint8)
    assert spec["depth"] == tf.TensorSpec([None, 12, 10, 1], tf.uint16)
    assert spec["y"] == tf.TensorSpec([None], tf.int64)
    assert spec["site"] == tf.TensorSpec([None], tf.string)
    assert spec["score"] == tf.TensorSpec([None], tf.float32)


def test_feature_spec_and_decode_batch_by_hand(raw_out: Path) -> None:
    manifest = read_manifest(raw_out)
    spec = feature_spec(manifest)
    assert spec["gray"] == tf.io.FixedLenFeature([], tf.string)
    assert spec["score"] == tf.io.FixedLenFeature([], tf.float32)
    records = tf.data.TFRecordDataset([str(p) for p in manifest.shard_paths(raw_out, "eval")]).batch(6)
    decoded = decode_batch(tf.io.parse_example(next(iter(records)), spec), manifest)
    reference = collect(build_stream(raw_out, "eval", StreamOptions(batch_size=6)))
    for name, tensor in decoded.items():
        np.testing.assert_array_equal(tensor.numpy(), reference[name], err_msg=name)


@pytest.mark.parametrize("split", list(SPLIT_ROWS))
def test_png_storage_with_gzip_equals_raw_and_jpeg_is_close(raw_out: Path, coded_out: Path, split: str) -> None:
    manifest = read_manifest(coded_out)
    assert manifest.compression == "GZIP"
    for path in map(Path, manifest.shard_paths(coded_out, split)):
        assert path.name.endswith(".tfrecord.gz") and path.read_bytes()[:2] == b"\x1f\x8b"
    assert {manifest.features[c].encoding for c in ("gray", "rgb", "depth")} == {"png"}
    coded = collect(build_stream(coded_out, split, StreamOptions(batch_size=5)))
    raw = collect(build_stream(raw_out, split, StreamOptions(batch_size=5)))
    for name in ("gray", "rgb", "depth", "y", "site", "score"):
        assert coded[name].dtype == raw[name].dtype, name
        np.testing.assert_array_equal(coded[name], raw[name], err_msg=name)
    for name in ("gray_lossy", "rgb_lossy"):
        assert manifest.features[name].encoding == "jpeg"
        assert coded[name].shape == raw[name].shape and coded[name].dtype == np.uint8
        error = np.abs(coded[name].astype(np.int32) - raw[name].astype(np.int32))
        assert error.mean() < 3.0 and error.max() < 40, (name, error.mean(), error.max())


def test_png_and_jpeg_decode_per_record_with_shuffle_repeat_and_drop_remainder(
        coded_out: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large PNG/JPEG images take the per-record decode path: the same pixels and examples in every mode."""
    chunked = collect(build_stream(coded_out, "train", StreamOptions(batch_size=4)))
    monkeypatch.setattr(reader, "PER_RECORD_PIXELS", 12 * 10)  # these 12x10 images count as large
    assert reader.decodes_per_record(read_manifest(coded_out))
    ordered = collect(build_stream(coded_out, "train", StreamOptions(batch_size=4)))
    for name in chunked:
        assert chunked[name].dtype == ordered[name].dtype, name
        np.testing.assert_array_equal(chunked[name], ordered[name], err_msg=name)
    key = lambda batch: sorted(zip(batch["y"].tolist(), (i.tobytes() for i in batch["rgb"]),  # noqa: E731
                                   (i.tobytes() for i in batch["rgb_lossy"])))
    budget = budget_for(coded_out, 6)
    shuffled = collect(build_stream(coded_out, "train", StreamOptions(batch_size=4, shuffle_mb=budget, seed=2,
                                                                      deterministic=False)))
    assert key(shuffled) == key(ordered) and not np.array_equal(shuffled["rgb"], ordered["rgb"])
    repeated = build_stream(coded_out, "train", StreamOptions(batch_size=5, repeat=True, drop_remainder=True))
    assert repeated.element_spec["rgb_lossy"] == tf.TensorSpec([5, 12, 10, 3], tf.uint8)
    got = np.concatenate([b["gray_lossy"].numpy() for b in repeated.take(4)])
    np.testing.assert_array_equal(got, np.concatenate([ordered["gray_lossy"], ordered["gray_lossy"][:6]]))
    stored = next(iter(build_stream(coded_out, "train", StreamOptions(batch_size=4, decode=False))))
    assert stored["rgb_lossy"].dtype == tf.string and stored["rgb_lossy"].shape == (4,)


def test_batch_size_and_drop_remainder(raw_out: Path) -> None:
    sizes = [len(b["y"]) for b in build_stream(raw_out, "train", StreamOptions(batch_size=4))]
    assert sizes == [4, 4, 4, 2]
    dropped = build_stream(raw_out, "train", StreamOptions(batch_size=4, drop_remainder=True))
    assert [len(b["y"]) for b in dropped] == [4, 4, 4]
    assert dropped.element_spec["gray"].shape.as_list() == [4, 12, 10, 1]


def test_repeat_continues_into_the_next_epoch_in_order(raw_out: Path) -> None:
    once = collect(build_stream(raw_out, "train", StreamOptions(batch_size=14)))["depth"]
    repeated = build_stream(raw_out, "train", StreamOptions(batch_size=4, repeat=True))
    got = np.concatenate([b["depth"].numpy() for b in repeated.take(5)])
    np.testing.assert_array_equal(got, np.concatenate([once, once[:6]]))


def test_shuffle_is_a_repeatable_permutation(raw_out: Path) -> None:
    ordered = collect(build_stream(raw_out, "train", StreamOptions(batch_size=4)))["depth"]
    first = collect(build_stream(raw_out, "train", StreamOptions(batch_size=4, shuffle_mb=budget_for(raw_out, 20),
                                                                 seed=3)))["depth"]
    second = collect(build_stream(raw_out, "train", StreamOptions(batch_size=4, shuffle_mb=budget_for(raw_out, 20),
                                                                  seed=3)))["depth"]
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first, ordered)
    key = lambda images: sorted(image.tobytes() for image in images)  # noqa: E731 - order-free comparison
    assert key(first) == key(ordered)
    loose = collect(build_stream(raw_out, "train", StreamOptions(batch_size=4, deterministic=False)))["depth"]
    assert key(loose) == key(ordered)


def test_every_epoch_is_a_new_order_of_the_same_examples(raw_out: Path) -> None:
    key = lambda images: sorted(image.tobytes() for image in images)  # noqa: E731 - order-free comparison
    ordered = key(collect(build_stream(raw_out, "train", StreamOptions(batch_size=4)))["depth"])
    # 14 train examples, batches of 14: each batch of the repeated stream is one whole epoch.
    repeated = build_stream(raw_out, "train", StreamOptions(batch_size=14, shuffle_mb=budget_for(raw_out, 6), seed=5,
                                                            repeat=True))
    epochs = [batch["depth"].numpy() for batch in repeated.take(4)]
    assert all(key(epoch) == ordered for epoch in epochs)
    assert len({epoch.tobytes() for epoch in epochs}) == 4
    rebuilt = build_stream(raw_out, "train", StreamOptions(batch_size=14, shuffle_mb=budget_for(raw_out, 6), seed=5,
                                                           repeat=True))
    assert [b["depth"].numpy().tobytes() for b in rebuilt.take(4)] == [e.tobytes() for e in epochs]  # seed's order
    once = build_stream(raw_out, "train", StreamOptions(batch_size=14, shuffle_mb=budget_for(raw_out, 6), seed=5))
    passes = [collect(once)["depth"] for _ in range(3)]
    assert len({p.tobytes() for p in passes}) == 3  # a one-pass stream iterated again: a new order


@pytest.mark.parametrize("shuffle_buffer", [0, 5])  # one stream of records / shards interleaved
def test_file_auto_sharding_gives_each_worker_whole_shards(raw_out: Path, shuffle_buffer: int) -> None:
    # The rewrite tf.distribute applies per worker under AutoShardPolicy.FILE (no public entry point).
    from tensorflow.python.data.experimental.ops.distribute import _AutoShardDataset

    everything = sorted(image.tobytes() for image in collect(build_stream(raw_out, "train",
                                                                          StreamOptions(batch_size=32)))["depth"])
    shards = sorted((raw_out / "Split-train").glob("data-*"))
    assert len(shards) == 3
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.FILE
    seen = []
    for worker in range(2):
        stream_options = StreamOptions(batch_size=3, shuffle_mb=budget_for(raw_out, shuffle_buffer), seed=1)
        dataset = build_stream(raw_out, "train", stream_options)
        sharded = _AutoShardDataset(dataset.with_options(options), 2, worker)
        seen.append(sorted(image.tobytes() for image in collect(sharded)["depth"]))
    assert seen[0] and seen[1] and not set(seen[0]) & set(seen[1])
    assert sorted(seen[0] + seen[1]) == everything


def test_features_subset(raw_out: Path) -> None:
    batch = next(iter(build_stream(raw_out, "eval", StreamOptions(batch_size=2, features=["y", "gray"]))))
    assert set(batch) == {"y", "gray"}
    with pytest.raises(ValueError, match="'nope'"):
        build_stream(raw_out, "eval", StreamOptions(batch_size=2, features=["y", "nope"]))


def test_bad_arguments_name_the_value(raw_out: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="batch_size.*0"):
        build_stream(raw_out, "train", StreamOptions(batch_size=0))
    with pytest.raises(ValueError, match="'test'.*eval.*train"):
        build_stream(raw_out, "test", StreamOptions(batch_size=2))
    with pytest.raises(IncompleteOutputError):
        build_stream(tmp_path, "train", StreamOptions(batch_size=2))


def test_missing_or_changed_shard_is_reported(raw_out: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(raw_out, tmp_path / "copy"))
    shards = [Path(p) for p in read_manifest(copy).shard_paths(copy, "train")]
    stray = shards[0].with_name("data-99999-of-99999.tfrecord")
    shutil.copyfile(shards[0], stray)  # a shard of another run, not in the manifest
    with pytest.raises(ValueError, match=f"not listed.*{stray.name}"):
        build_stream(copy, "train", StreamOptions(batch_size=2))
    stray.unlink()
    with open(shards[2], "ab") as stream:
        stream.write(b"\0")
    with pytest.raises(ValueError, match=shards[2].name):
        build_stream(copy, "train", StreamOptions(batch_size=2))
    shards[1].unlink()
    with pytest.raises(FileNotFoundError, match=shards[1].name):
        build_stream(copy, "train", StreamOptions(batch_size=2))


def test_empty_split_yields_no_batches(raw_out: Path, tmp_path: Path) -> None:
    copy = Path(shutil.copytree(raw_out, tmp_path / "copy"))
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["splits"]["holdout"] = {"num_examples": 0, "shards": [], "label_counts": {}}
    (copy / "manifest.json").write_text(json.dumps(manifest))
    dataset = build_stream(copy, "holdout", StreamOptions(batch_size=3))
    assert list(dataset) == []
    assert dataset.element_spec["rgb"] == tf.TensorSpec([None, 12, 10, 3], tf.uint8)
