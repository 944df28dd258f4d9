"""The repeated stream is seekable: started at any position it yields exactly what the fresh stream yields from there.

A split of 37 examples in 3 shards, each example's row id stored with it: positions mid-window,
at a window's edge, at a shard's edge, across passes, with folds and without a shuffle window. Worker
slices of a global batch put together are the global batch, whatever the number of workers, and the
record-order tap names the records at each position.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from helpers_reader import budget_for, numbered_examples
from shardflow.core.errors import ConfigError
from shardflow.core.example_rows import read_example_rows
from shardflow.core.manifest import read_manifest
from shardflow.core.folds import FoldSelection
from shardflow.core.input_stream import StreamOptions, build_stream, stream_start
from shardflow.core.stream_position import WorkerSlice

pytestmark = pytest.mark.unit
EXAMPLES = 37


@pytest.fixture(scope="module")
def rows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return numbered_examples(tmp_path_factory.mktemp("resume"), EXAMPLES, 5, min_shards=3)


def _ids(out: Path, count: int, recorded: list | None = None, **options: object) -> list[int]:
    """The row ids of the first `count` examples of a repeated stream, in batches of one."""
    stream_options = StreamOptions(batch_size=1, repeat=True, features=("rid",), seed=3, **options)
    tap = None if recorded is None else (lambda p, i: recorded.append((p.copy(), i.copy())) or np.int64(0))
    stream = build_stream(out, "train", stream_options, record_order=tap)
    return [int(batch["rid"][0]) for batch in stream.take(count)]


@pytest.mark.parametrize("window_examples", [0, 5, 12, 100])
def test_a_stream_started_at_any_position_goes_on_as_the_fresh_one(rows: Path, window_examples: int) -> None:
    budget = budget_for(rows, window_examples) if window_examples else 0.0
    fresh = _ids(rows, 4 * EXAMPLES, shuffle_mb=budget)
    for first_pass in (fresh[:EXAMPLES], fresh[EXAMPLES:2 * EXAMPLES]):
        assert sorted(first_pass) == list(range(EXAMPLES))  # each pass: every example once
    if window_examples:
        assert fresh[:EXAMPLES] != fresh[EXAMPLES:2 * EXAMPLES]  # a new order each pass
    for start in (1, 4, 5, 11, 12, 13, 36, 37, 38, 60, 2 * EXAMPLES + 7):
        assert _ids(rows, 20, start=start, shuffle_mb=budget) == fresh[start:start + 20], start


def test_folds_resume_on_the_kept_examples(rows: Path) -> None:
    folds = FoldSelection.training(count=3, held_out=1, seed=0)
    kept = folds.size(EXAMPLES)
    fresh = _ids(rows, 3 * kept, shuffle_mb=budget_for(rows, 6), folds=folds)
    assert len(set(fresh[:kept])) == kept
    for start in (3, kept - 1, kept + 2):
        assert _ids(rows, 10, start=start, shuffle_mb=budget_for(rows, 6), folds=folds) == fresh[start:start + 10]


def test_what_a_resume_reads_first_is_at_most_a_shard_and_a_window(rows: Path) -> None:
    options = StreamOptions(batch_size=1, repeat=True, seed=3, shuffle_mb=budget_for(rows, 6), start=2 * EXAMPLES + 20)
    start = stream_start(rows, "train", options)
    assert (start.point.pass_index, start.point.offset_in_pass, start.window) == (2, 20, 6)
    assert start.point.drop_in_window == 20 % 6 and start.point.skip_in_shard < 13  # < one shard (~12 records)


@pytest.mark.parametrize("workers", [1, 2, 4])
def test_worker_slices_put_together_are_the_global_batches(rows: Path, workers: int) -> None:
    budget, steps, start = budget_for(rows, 7), 12, 8 * 3
    whole = _ids(rows, steps * 8, shuffle_mb=budget, start=start)
    parts = [_ids(rows, steps * 8 // workers, shuffle_mb=budget, start=start,
                  worker_slice=WorkerSlice.for_worker(8, workers, index)) for index in range(workers)]
    rebuilt = [rid for step in range(steps) for part in parts for rid in part[step * (8 // workers):
                                                                              (step + 1) * (8 // workers)]]
    assert rebuilt == whole


def test_the_record_order_tap_names_each_position_s_record(rows: Path) -> None:
    recorded: list = []
    ids = _ids(rows, 30, recorded, shuffle_mb=budget_for(rows, 6), start=10,
               worker_slice=WorkerSlice(global_batch=2, first=1, count=1))
    positions = np.concatenate([p for p, _ in recorded])
    assert positions[:30].tolist() == list(range(11, 70, 2))  # the second record of each global batch of 2
    shard_and_number = np.concatenate([i for _, i in recorded])[:30]
    # Provenance numbers examples by shard, then record: its CSV row names the example (rid = row - 1).
    manifest = read_manifest(rows)
    starts = np.cumsum([0] + [s.num_examples for s in manifest.splits["train"].shards])
    provenance = read_example_rows(rows, manifest, "train")
    assert [int(provenance.row[starts[s] + n]) - 1 for s, n in shard_and_number] == ids
    fresh = _ids(rows, 70, shuffle_mb=budget_for(rows, 6))
    assert ids == fresh[11:70:2]


def test_a_slice_that_does_not_fit_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot be split evenly between 3 workers"):
        WorkerSlice.for_worker(8, 3, 0)
    with pytest.raises(ConfigError, match="needs whole batches of 3"):
        StreamOptions(batch_size=3, repeat=True, worker_slice=WorkerSlice(global_batch=8, first=0, count=4))
    with pytest.raises(ConfigError, match="apply to a repeated stream"):
        StreamOptions(batch_size=1, start=5)
