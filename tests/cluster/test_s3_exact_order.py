"""The exact order read from s3:// (moto on loopback) is the local disk's, example for example.

An object store's shards are read ahead several at once (`stream_read.in_order`); what a stream hands on
must still be the order exact resume relies on. 900 examples in 3 shards of 300 (more than one read chunk
each, so a shard's chunks must all come before the next shard's), each example's row id stored with it,
written locally and uploaded: the one-pass order and the repeated (training) order, fresh and resumed
mid-shard in a later pass, with and without folds, are compared id for id.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers_reader import budget_for, numbered_examples
from helpers_s3 import upload_tree
from shardflow.core.folds import FoldSelection
from shardflow.core.input_stream import READ_CHUNK, StreamOptions, build_stream
from shardflow.core.manifest import read_manifest

EXAMPLES, SHARDS = 900, 3


@pytest.fixture(scope="module")
def copies(tmp_path_factory: pytest.TempPathFactory, s3_server) -> tuple[str, str]:  # noqa: ANN001 (S3Server)
    """(local output, the same output on s3://)."""
    out = numbered_examples(tmp_path_factory.mktemp("exact_order"), EXAMPLES, 55, num_shards=SHARDS)
    return str(out), upload_tree(s3_server, out, s3_server.bucket(), "examples")


def _ids(examples: str, count: int | None = None, **options: object) -> list[int]:
    """The row ids a stream hands on, in order: all of a pass, or the first `count` (a multiple of 50)."""
    stream = build_stream(examples, "train", StreamOptions(batch_size=50, features=("rid",), **options))
    stream = stream if count is None else stream.take(count // 50)
    return [int(i) for batch in stream for i in batch["rid"].numpy()]


def test_the_shards_are_large_enough_to_need_whole_shard_blocks(copies: tuple[str, str]) -> None:
    sizes = [shard.num_examples for shard in read_manifest(copies[0]).splits["train"].shards]
    assert len(sizes) == SHARDS and sum(sizes) == EXAMPLES and min(sizes) > READ_CHUNK


def test_one_pass_in_the_shards_order_is_the_same_from_s3(copies: tuple[str, str]) -> None:
    local, remote = copies
    on_disk = _ids(local, deterministic=True)
    assert sorted(on_disk) == list(range(EXAMPLES))
    assert _ids(remote, deterministic=True) == on_disk


@pytest.mark.parametrize("window_examples", [0, 128])
def test_the_training_order_from_s3_is_the_local_one_fresh_and_resumed(copies: tuple[str, str],
                                                                       window_examples: int) -> None:
    local, remote = copies
    shuffle = {"shuffle_mb": budget_for(Path(local), window_examples) if window_examples else 0.0}
    fresh = _ids(local, 3 * EXAMPLES, repeat=True, seed=11, deterministic=True, **shuffle)
    assert sorted(fresh[:EXAMPLES]) == list(range(EXAMPLES))
    if window_examples:
        assert fresh[:EXAMPLES] != fresh[EXAMPLES:2 * EXAMPLES]  # a new order each pass
    assert _ids(remote, 3 * EXAMPLES, repeat=True, seed=11, deterministic=True, **shuffle) == fresh
    start = EXAMPLES + 150  # mid-shard in the second pass: what a resumed run reads
    resumed = _ids(remote, EXAMPLES, repeat=True, seed=11, deterministic=True, start=start, **shuffle)
    assert resumed == fresh[start:start + EXAMPLES]


def test_a_fold_selection_reads_the_same_examples_in_the_same_order_from_s3(copies: tuple[str, str]) -> None:
    local, remote = copies
    folds = FoldSelection.training(count=3, held_out=1, seed=4)
    on_disk = _ids(local, deterministic=True, folds=folds)
    assert 0 < len(on_disk) < EXAMPLES
    assert _ids(remote, deterministic=True, folds=folds) == on_disk
