"""The one input stream: its stages run in the order its docstring states, and each stage does its part.

The order is read back from the built tf.data graph: every stage names the transformation it adds,
so a stage moved in the code moves in the graph (two planted swaps show the check failing).
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from helpers_images import random_pixels, write_csv, write_palette_mask, write_png
from helpers_reader import budget_for
from shardflow.core import input_stream
from shardflow.core.errors import ConfigError
from shardflow.core.input_stream import SERIALIZED, STAGES, DecodeCrop, StreamOptions, build_stream
from shardflow.core.stream_position import WorkerSlice
from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def masks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """24 train / 8 eval RGB images (PNG) with masks of class ids {0, 1}, in 3 train shards."""
    root, rng = tmp_path_factory.mktemp("stream"), np.random.default_rng(3)
    for split, count in (("train", 24), ("eval", 8)):
        rows = []
        for i in range(count):
            write_png(root / f"{split}/img{i}.png", random_pixels(rng, (6, 5, 3)))
            write_palette_mask(root / f"{split}/msk{i}.png", rng.integers(0, 2, (6, 5)).astype(np.uint8))
            rows.append([f"{split}/img{i}.png", f"{split}/msk{i}.png", str(i)])
        write_csv(root / f"{split}.csv", ["img", "msk", "rid"], rows)
    out = root / "out"
    run(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"), IndexSpec(str(root / "eval.csv"),
                                                                                         "eval")),
                         data_root=str(root), output=str(out), storage=(("*", "png"),), min_shards=3),
        echo=lambda _: None)
    return out


def documented_order() -> list[str]:
    """The stage names of the order line in core/input_stream.py's docstring."""
    line = next(text for text in input_stream.__doc__.splitlines() if text.strip().startswith("read →"))
    return [name.strip().replace(" ", "_") for name in line.split("→")]


def built_order(dataset: tf.data.Dataset) -> list[str]:
    """The stage names the dataset's transformations carry, from the source on (fused stages split)."""
    names: list[str] = []

    def walk(node: tf.data.Dataset) -> None:
        for parent in node._inputs():
            walk(parent)
        name = getattr(node, "_name", None)
        for stage in (name or "").split("__") if name else []:
            if not names or names[-1] != stage:
                names.append(stage)

    walk(dataset)
    return names


def out_of_order(names: list[str]) -> list[str]:
    """The stages that come before one documented earlier, or are not documented at all."""
    order = documented_order()
    ranks = [order.index(n) if n in order else -1 for n in names]
    return [n for n, r, before in zip(names, ranks, [-1] + ranks) if r < 0 or r < before]


def _pair(features: dict[str, tf.Tensor]) -> tuple[tf.Tensor, tf.Tensor]:
    return tf.cast(features["img"], tf.float32) / 255.0, tf.cast(features["msk"][..., 0], tf.int32)


def _flip(images: tf.Tensor, targets: tf.Tensor, index: tf.Tensor, rows: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    return images[:, :, ::-1], targets[:, :, ::-1]


def _every_stage(masks: Path, recorded: list | None = None) -> tf.data.Dataset:
    """Every stage on: worker 1's half of global batches of 8, and the record order tapped into `recorded`."""
    options = StreamOptions(batch_size=4, shuffle_mb=budget_for(masks, 8), seed=1, repeat=True, drop_remainder=True,
                            features=("img", "msk"), class_weights=(0.5, 2.0), input_name="img",
                            worker_slice=WorkerSlice(global_batch=8, first=4, count=4))
    recorded = [] if recorded is None else recorded
    tap = (lambda positions, ids: recorded.append((positions.copy(), ids.copy())) or np.int64(0))
    return build_stream(masks, "train", options, model_step=_pair, augment=_flip, record_order=tap)


def test_the_docstring_states_the_order_of_the_stage_list() -> None:
    assert documented_order() == [name for name, _ in STAGES]
    assert documented_order()[:5] == ["read", "shuffle", "slice", "record_order", "parse"]  # the shuffle holds serialized records


def test_the_built_stream_runs_the_stages_in_the_documented_order(masks: Path) -> None:
    names = built_order(_every_stage(masks))
    assert names == documented_order(), names
    assert names.count("prefetch") == 1 and names[-1] == "prefetch"
    untapped = build_stream(masks, "train", StreamOptions(batch_size=4, shuffle_mb=budget_for(masks, 8), seed=1,
                                                          repeat=True, features=("img",)))
    assert "record_order" not in built_order(untapped) and "slice" not in built_order(untapped)  # off: absent
    # Large images and the fused crop: parse per chunk, then decode and transform per record.
    crop = DecodeCrop("img", lambda index, position: tf.constant([0, 0, 4, 4]))
    per_record = build_stream(masks, "eval", StreamOptions(batch_size=4, features=("img",)), crop=crop)
    assert built_order(per_record) == ["read", "parse", "decode", "batch", "prefetch"]
    assert out_of_order(built_order(per_record)) == []
    # Without tf.data's autotuning model, deleting a stream's iterator does not wait for its next round
    # (input_stream.AUTOTUNE_MODEL): the end of every `fit`, validation and scoring pass deletes one.
    assert not untapped.options().autotune.enabled and not per_record.options().autotune.enabled


@pytest.mark.parametrize("swap", [("shuffle", "slice"), ("batch", "prefetch")])
def test_a_swap_of_two_stages_is_caught(masks: Path, monkeypatch: pytest.MonkeyPatch, swap: tuple[str, str]) -> None:
    stages = list(STAGES)
    first, second = (next(i for i, (n, _) in enumerate(stages) if n == name) for name in swap)
    stages[first], stages[second] = stages[second], stages[first]
    monkeypatch.setattr(input_stream, "STAGES", tuple(stages))
    assert out_of_order(built_order(_every_stage(masks))) != []


def test_each_stage_does_its_part(masks: Path) -> None:
    inputs, ids, weights = next(iter(_every_stage(masks)))
    assert set(inputs) == {"img"} and inputs["img"].shape == (4, 6, 5, 3) and inputs["img"].dtype == tf.float32
    assert ids.shape == (4, 6, 5) and set(np.unique(ids.numpy())) <= {0, 1}
    np.testing.assert_array_equal(weights.numpy(), np.where(ids.numpy() == 1, 2.0, 0.5))  # per pixel, after the flip
    plain = next(iter(build_stream(masks, "train", StreamOptions(batch_size=4, features=("rid", "msk")))))
    assert plain["rid"].numpy().tolist() == [0, 1, 2, 3] and plain["msk"].dtype == tf.uint8
    flipped = next(iter(build_stream(masks, "train", StreamOptions(batch_size=4, features=("img", "msk")),
                                     model_step=_pair, augment=_flip)))
    np.testing.assert_array_equal(flipped[1].numpy(), plain["msk"].numpy()[:, :, ::-1, 0])


def test_serialized_records_are_kept_beside_their_features(masks: Path) -> None:
    options = StreamOptions(batch_size=32, features=("rid",), keep_serialized=True)
    batch = next(iter(build_stream(masks, "eval", options)))
    parsed = tf.io.parse_example(batch[SERIALIZED], {"rid": tf.io.FixedLenFeature([], tf.int64)})
    assert parsed["rid"].numpy().tolist() == batch["rid"].numpy().tolist() == list(range(8))


@pytest.mark.parametrize("options, message", [
    ({"batch_size": 0}, "batch_size must be an integer >= 1, got 0"),
    ({"batch_size": 2, "shuffle_mb": -1}, "shuffle_mb must be a number of MB >= 0, got -1"),
    ({"batch_size": 2, "features": "img"}, "features must be a non-empty list of feature names, got 'img'"),
    ({"batch_size": 2, "class_weights": (1.0, -2.0)}, "class_weights must be numbers >= 0"),
    ({"batch_size": 2, "repeat": "yes"}, "repeat must be True or False, got 'yes'"),
    ({"batch_size": 2, "folds": (1, 2)}, "folds must be a FoldSelection, got (1, 2)"),
])
def test_bad_options_name_the_value(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        StreamOptions(**options)
    with pytest.raises(TypeError):
        StreamOptions(4)  # keyword-only
