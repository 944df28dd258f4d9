"""Fold assignment (core/folds.py) and the reader's fold selection on real shards.

The assignment: balanced, disjoint, covering, deterministic, not striped. The reader: a fold
selection yields exactly the examples at the selected positions, in order without a shuffle, and
the same examples with a shuffle window and shards interleaved. ExampleGen runs once per module on
45 tiny PNGs (3 shards), each row's `rid` column holding its row number.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from shardflow.core import stream_read
from shardflow.core.errors import ConfigError
from shardflow.core.folds import FoldSelection, fold_assignment
from shardflow.core.manifest import read_manifest
from shardflow.core.input_stream import StreamOptions, build_stream
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

from helpers_images import random_pixels, write_csv, write_png
from helpers_reader import budget_for, collect

pytestmark = pytest.mark.unit

ROWS = 45


@pytest.mark.parametrize("examples, folds", [(10, 3), (1_000, 3), (1_001, 5), (7, 7), (2, 2)])
def test_folds_are_balanced_disjoint_covering_and_deterministic(examples: int, folds: int) -> None:
    assignment = fold_assignment(examples, folds, seed=4)
    sizes = np.bincount(assignment, minlength=folds)
    assert sizes.sum() == examples and sizes.max() - sizes.min() <= 1
    assert np.array_equal(assignment, fold_assignment(examples, folds, seed=4))
    masks = [FoldSelection.held_out(folds, k, seed=4).mask(examples) for k in range(folds)]
    assert np.array_equal(np.sum(masks, axis=0), np.ones(examples))  # each position in exactly one fold
    for k in range(folds):
        training = FoldSelection.training(folds, k, seed=4)
        assert np.array_equal(training.mask(examples), ~masks[k])
        assert training.size(examples) == int((~masks[k]).sum())
        assert FoldSelection.held_out(folds, k, seed=4).size(examples) == int(masks[k].sum())


def test_folds_are_not_stripes_of_row_order_and_move_with_the_seed() -> None:
    assignment = fold_assignment(3_000, 3, seed=0)
    assert not np.array_equal(assignment, np.arange(3_000) % 3)
    # Each block of 300 consecutive rows is spread over all folds (no run of rows is one fold's).
    for block in assignment.reshape(10, 300):
        assert np.bincount(block, minlength=3).min() > 60
    assert 0.25 < np.mean(fold_assignment(3_000, 3, seed=1) == assignment) < 0.42  # ~1/3 agree by chance


@pytest.mark.parametrize("build, message", [
    (lambda: fold_assignment(10, 1), "folds must be an integer >= 2, got 1"),
    (lambda: FoldSelection(count=3, folds=()), "folds must be a non-empty sorted tuple"),
    (lambda: FoldSelection(count=3, folds=(2, 1)), "folds must be a non-empty sorted tuple"),
    (lambda: FoldSelection(count=3, folds=(3,)), "fold ids are 0..2"),
    (lambda: FoldSelection.training(3, held_out=5), "held_out must be a fold id in 0..2, got 5"),
    (lambda: FoldSelection.held_out(4, 0).mask(3), "4 folds need at least 4 examples, the split has 3"),
])
def test_bad_fold_values_are_config_errors(build, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build()


@pytest.fixture(scope="module")
def numbered(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ExampleGen output of 45 train rows in 3 shards; `rid` is each row's number (0-based)."""
    root = tmp_path_factory.mktemp("numbered")
    rng = np.random.default_rng(3)
    rows = []
    for i in range(ROWS):
        write_png(root / f"img/{i}.png", random_pixels(rng, (4, 4, 1)))
        rows.append([f"img/{i}.png", i % 3, i])
    write_csv(root / "train.csv", ["x", "y", "rid"], rows)
    out = root / "examples"
    run(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),), data_root=str(root), output=str(out),
                         roles=(("rid", "metadata"),), num_shards=3, near_duplicates="off"), echo=lambda _: None)
    return out


def _ids(out: Path, **options: object) -> list[int]:
    return collect(build_stream(out, "train", StreamOptions(batch_size=8, features=["rid"], **options)))["rid"].tolist()


def test_the_reader_yields_exactly_the_selected_folds_in_shard_order(numbered: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = read_manifest(numbered)
    assert [s.num_examples for s in manifest.splits["train"].shards] == [15, 15, 15]
    order = _ids(numbered)
    assert sorted(order) == list(range(ROWS))
    monkeypatch.setattr(stream_read, "READ_CHUNK", 4)  # chunks of 4: positions cross chunk boundaries in a shard
    seen: list[int] = []
    for k in range(3):
        held_out, training = FoldSelection.held_out(3, k, seed=2), FoldSelection.training(3, k, seed=2)
        expected = [order[p] for p in np.flatnonzero(held_out.mask(ROWS))]
        assert _ids(numbered, folds=held_out) == expected
        assert held_out.size(manifest.splits["train"].num_examples) == len(expected) == 15
        rest = _ids(numbered, folds=training)
        assert sorted(rest) == sorted(set(order) - set(expected)) and len(rest) == 30
        seen += expected
    assert sorted(seen) == list(range(ROWS))


def test_a_shuffled_interleaved_stream_yields_the_same_fold(numbered: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream_read, "READ_CHUNK", 4)
    training = FoldSelection.training(3, 1, seed=2)
    in_order = _ids(numbered, folds=training)
    shuffled = _ids(numbered, folds=training, shuffle_mb=budget_for(numbered, 10), seed=5, deterministic=False)
    assert shuffled != in_order and sorted(shuffled) == sorted(in_order)
    options = StreamOptions(batch_size=30, features=["rid"], folds=training, repeat=True,
                            shuffle_mb=budget_for(numbered, 10), seed=5)
    repeated = collect(build_stream(numbered, "train", options).take(4))["rid"]
    assert set(repeated.tolist()) == set(in_order)  # epochs after the first keep to the same folds


def test_predict_reads_the_same_fold_as_the_trainers_reader(numbered: Path) -> None:
    """predict's shard reader (Beam's work units) and the tf.data reader select one fold alike."""
    import tensorflow as tf

    from shardflow.predict import PredictConfig
    from shardflow.predict.plan import plan_examples

    held_out = FoldSelection.held_out(3, 0, seed=2)
    inputs = plan_examples(PredictConfig(model="m", output="o", examples=str(numbered), split="train",
                                         folds=held_out))
    read = [tf.train.Example.FromString(record).features.feature["rid"].int64_list.value[0]
            for unit in inputs.units for batch in inputs.prepare(unit) for _, record in batch]
    assert inputs.rows == len(read) == 15 and inputs.describe["folds"] == held_out.to_json()
    assert read == _ids(numbered, folds=held_out)
