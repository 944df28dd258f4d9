"""The shard writer's pieces: shard planning, part files, and the `WriteShards` PTransform on the
FnApiRunner (contents, order, GZIP, determinism). Framing and encoding: test_tfrecord_encoding.py."""
from __future__ import annotations

import os
from pathlib import Path

import apache_beam as beam
import pytest
import tensorflow as tf
from apache_beam.runners.portability.fn_api_runner import FnApiRunner
from apache_beam.testing import test_pipeline
from apache_beam.testing.util import assert_that, equal_to

from shardflow.core.manifest import ShardInfo
from shardflow.core.shard_plan import Part, ShardPlan, count_shards, plan_split
from shardflow.core.shard_writer import PartWriter, ShardSizing, WriteShards, write_shard
from shardflow.core.tfrecord import frame, iter_records

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

MB = 1 << 20


def _tf_records(path: Path, compression: str = "") -> list[bytes]:
    dataset = tf.data.TFRecordDataset(str(path), compression_type=compression or None)
    return [r.numpy() for r in dataset]


# ---------------------------------------------------------------- shard_plan

@pytest.mark.parametrize("records, payload, size_mb, fixed, minimum, expected", [
    (0, 0, 128, None, 4, 0),              # an empty split has no shards, whatever the options
    (0, 0, 128, 3, 1, 0),
    (1000, 1, 128, None, 1, 1),           # size-based: a tiny payload fits one shard
    (1000, 256 * MB, 128, None, 1, 2),    # exactly two shards' worth
    (1000, 256 * MB + 1, 128, None, 1, 3),  # one byte more starts a third shard
    (1000, 300 * MB, 128, None, 1, 3),
    (1000, 10 * MB, 1.5, None, 1, 7),     # fractional sizes: ceil(10 / 1.5)
    (1000, 300 * MB, 128, 5, 1, 5),       # --num-shards overrides the size rule
    (1000, 500 * MB, 128, 2, 1, 2),
    (1000, 1, 128, 2, 4, 4),              # --min-shards bounds a fixed count too
    (1000, 1, 128, None, 4, 4),           # --min-shards raises the size-based count ...
    (1000, 300 * MB, 128, None, 2, 3),    # ... but does not lower it
    (3, 1, 128, 10, 1, 3),                # capped at one shard per record
    (5, 1, 128, None, 8, 5),
    (2, 900 * MB, 128, None, 1, 2),
])
def test_count_shards(records: int, payload: int, size_mb: float, fixed: int | None, minimum: int, expected: int) -> None:
    assert count_shards(records, payload, size_mb, fixed, minimum) == expected


def _parts(counts: list[int]) -> list[Part]:
    return [Part(f"p{i:02d}", n, 10 * n) for i, n in enumerate(counts)]


@pytest.mark.parametrize("counts, num_shards", [
    ([3, 3], 2), ([10], 3), ([1, 0, 4, 2, 0, 7], 4), ([5, 5, 5], 1), ([1, 1, 1, 1], 4), ([2, 9, 1], 5), ([0, 6], 6),
])
def test_plan_split_covers_every_record_once_in_order(counts: list[int], num_shards: int) -> None:
    parts = _parts(counts)
    plans = plan_split("train", parts, num_shards)
    total = sum(counts)
    assert [p.index for p in plans] == list(range(num_shards))
    assert all(p.split == "train" and p.num_shards == num_shards for p in plans)
    covered = [(path, i) for plan in plans for path, start, end in plan.pieces for i in range(start, end)]
    assert covered == [(p.path, i) for p in parts for i in range(p.num_records)]
    sizes = [p.num_records for p in plans]
    assert sizes == [sum(end - start for _, start, end in p.pieces) for p in plans]
    assert sum(sizes) == total and max(sizes) - min(sizes) <= 1  # balanced
    assert all(start < end for p in plans for _, start, end in p.pieces)  # no empty pieces


def test_plan_split_file_names_and_no_shards() -> None:
    plan = plan_split("eval", _parts([4]), 2)[1]
    assert plan.file_name("") == "data-00001-of-00002.tfrecord"
    assert plan.file_name("GZIP") == "data-00001-of-00002.tfrecord.gz"
    assert plan_split("eval", [], 0) == []


# ---------------------------------------------------------------- PartWriter and write_shard

def test_part_writer_publishes_only_on_close(tmp_path: Path) -> None:
    target = tmp_path / "parts" / "train" / "0000-000001.tfrecord"
    writer = PartWriter(str(target))
    writer.write(b"abc")
    writer.write(b"defg", payload_bytes=100)
    assert not target.exists()  # a killed worker leaves only a temporary name
    part = writer.close()
    assert part == Part(str(target), 2, 103)
    assert _tf_records(target) == [b"abc", b"defg"]
    aborted = PartWriter(str(tmp_path / "parts" / "train" / "0000-000002.tfrecord"))
    aborted.write(b"x")
    aborted.abort()
    assert sorted(p.name for p in (tmp_path / "parts" / "train").iterdir()) == ["0000-000001.tfrecord"]


def test_write_shard_refuses_a_short_part_and_leaves_nothing(tmp_path: Path) -> None:
    part = _write_part(tmp_path / "parts" / "p0.tfrecord", [b"r0", b"r1"])
    plan = ShardPlan("train", 0, 1, ((part.path, 1, 5),), 4)  # asks for records the part lacks
    with pytest.raises(RuntimeError, match="copied 1 records, planned 4"):
        write_shard(plan, str(tmp_path / "out"), "", {part.path: 2})
    assert list((tmp_path / "out" / "Split-train").iterdir()) == []


# ---------------------------------------------------------------- WriteShards on the FnApiRunner

def _write_part(path: Path, records: list[bytes]) -> Part:
    writer = PartWriter(str(path))
    for record in records:
        writer.write(record)
    return writer.close()


def _make_parts(root: Path) -> tuple[list[tuple[str, Part]], dict[str, list[bytes]]]:
    """Parts of two splits (record counts train 3+0+5+2, eval 4), listed out of path order."""
    pairs, records = [], {}
    for split, counts in (("train", [3, 0, 5, 2]), ("eval", [4])):
        records[split] = []
        for chunk, count in enumerate(counts):
            data = [f"{split}-{chunk}-{i}".encode() * (i + 1) for i in range(count)]
            records[split].extend(data)
            pairs.append((split, _write_part(root / "parts" / split / f"0000-{chunk:06d}.tfrecord", data)))
    return list(reversed(pairs)), records


def _run_write_shards(pairs: list[tuple[str, Part]], out_dir: Path, sizing: ShardSizing, check) -> None:
    with test_pipeline.TestPipeline(runner=FnApiRunner()) as pipeline:
        shards = pipeline | beam.Create(pairs) | WriteShards(str(out_dir), sizing)
        assert_that(shards, check)


def _read_split(out_dir: Path, split: str, compression: str) -> list[bytes]:
    records = []
    for path in sorted((out_dir / f"Split-{split}").iterdir()):
        records.extend(_tf_records(path, compression))
    return records


def test_write_shards_uncompressed(tmp_path: Path) -> None:
    pairs, records = _make_parts(tmp_path)
    out_dir = tmp_path / "out"

    def info(split: str, index: int, count: int, lo: int, hi: int) -> tuple[str, ShardInfo]:
        size = sum(len(frame(r)) for r in records[split][lo:hi])
        return split, ShardInfo(f"Split-{split}/data-{index:05d}-of-{count:05d}.tfrecord", hi - lo, size)

    expected = [info("train", 0, 3, 0, 3), info("train", 1, 3, 3, 6), info("train", 2, 3, 6, 10),
                info("eval", 0, 3, 0, 1), info("eval", 1, 3, 1, 2), info("eval", 2, 3, 2, 4)]
    _run_write_shards(pairs, out_dir, ShardSizing(num_shards=3), equal_to(expected))
    for split in ("train", "eval"):
        assert _read_split(out_dir, split, "") == records[split]  # shards in order = parts in order
        for shard in sorted((out_dir / f"Split-{split}").iterdir()):
            with open(shard, "rb") as stream:
                assert b"".join(frame(r) for r in iter_records(stream, str(shard))) == shard.read_bytes()


def _gzip_check(out_dir: Path, counts: dict[str, list[int]]):
    def check(actual: list[tuple[str, ShardInfo]]) -> None:
        for split, expected in counts.items():
            infos = sorted((i for s, i in actual if s == split), key=lambda i: i.path)
            assert [i.num_examples for i in infos] == expected
            for index, item in enumerate(infos):
                assert item.path == f"Split-{split}/data-{index:05d}-of-{len(expected):05d}.tfrecord.gz"
                assert item.bytes == os.path.getsize(out_dir / item.path)
        assert len(actual) == sum(len(c) for c in counts.values())
    return check


def test_write_shards_gzip_is_readable_and_deterministic(tmp_path: Path) -> None:
    pairs, records = _make_parts(tmp_path)
    counts = {"train": [5, 5], "eval": [2, 2]}
    sizing = ShardSizing(compression="GZIP", num_shards=2)
    outputs = [tmp_path / "out1", tmp_path / "out2"]
    for out_dir in outputs:
        _run_write_shards(pairs, out_dir, sizing, _gzip_check(out_dir, counts))
    for split in ("train", "eval"):
        assert _read_split(outputs[0], split, "GZIP") == records[split]
        first = sorted((outputs[0] / f"Split-{split}").iterdir())
        second = sorted((outputs[1] / f"Split-{split}").iterdir())
        assert [p.name for p in first] == [p.name for p in second]
        assert all(a.read_bytes() == b.read_bytes() for a, b in zip(first, second))
        assert all(p.read_bytes()[:2] == b"\x1f\x8b" for p in first)  # real gzip members
    assert [p for p in outputs[0].rglob("*") if ".tmp" in p.name] == []


def test_write_shards_by_size_and_empty_input(tmp_path: Path) -> None:
    pairs, records = _make_parts(tmp_path)
    payloads = {s: sum(len(r) for r in records[s]) for s in records}
    assert payloads == {"train": 216, "eval": 80}
    # 80-byte shards: train needs ceil(216 / 80) = 3; eval needs 1, raised to --min-shards 2.
    sizing = ShardSizing(shard_size_mb=80 / MB, min_shards=2)
    out_dir = tmp_path / "out"

    def check(actual: list[tuple[str, ShardInfo]]) -> None:
        per_split = {s: sorted(i.num_examples for t, i in actual if t == s) for s in ("train", "eval")}
        assert per_split == {"train": [3, 3, 4], "eval": [2, 2]}

    _run_write_shards(pairs, out_dir, sizing, check)
    assert _read_split(out_dir, "train", "") == records["train"]
    assert _read_split(out_dir, "eval", "") == records["eval"]
    _run_write_shards([], tmp_path / "empty", sizing, equal_to([]))
    assert not (tmp_path / "empty").exists()
