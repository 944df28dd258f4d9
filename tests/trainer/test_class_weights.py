"""`--class-weight`: the weights reach the loss per example (per pixel for masks), "balanced" comes
from the label counts in ExampleGen's manifest, and on an imbalanced set the Evaluator's per-class
recall of the rare class rises with them."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from shardflow.core.errors import ConfigError
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
from shardflow.trainer.class_weights import task_class_weights
from shardflow.trainer.executor import run as train
from shardflow.trainer.task import resolve_task
from shardflow.trainer.features import RawToModel
from shardflow.trainer.input_pipeline import build_streams

from helpers_images import write_csv, write_png


@pytest.fixture(scope="module")
def imbalanced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """9 of 10 train images are 'common'; the 'rare' ones differ by a faint bright patch in noise."""
    root, rng = tmp_path_factory.mktemp("imbalanced"), np.random.default_rng(5)
    rows: dict[str, list] = {"train": [], "eval": []}
    for split, count, rare_every in (("train", 300, 10), ("eval", 100, 2)):
        for i in range(count):
            label = "rare" if i % rare_every == 0 else "common"
            pixels = rng.integers(0, 160, (8, 8, 1)).astype(np.uint8)
            if label == "rare":
                pixels[2:6, 2:6] = np.minimum(pixels[2:6, 2:6].astype(int) + 60, 255).astype(np.uint8)
            write_png(root / f"{split}/{i}.png", pixels)
            rows[split].append([f"{split}/{i}.png", label])
        write_csv(root / f"{split}.csv", ["x", "y"], rows[split])
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(root / "train.csv"), "train"),
                                          IndexSpec(str(root / "eval.csv"), "eval")),
                                 data_root=str(root), output=str(root / "examples")), echo=lambda _: None)
    return root


def _rare_recall(root: Path, name: str, **options: object) -> float:
    config = TrainerConfig(input=InputOptions(examples=str(root / "examples"), batch_size=16, seed=1,
                                              deterministic=True,
                                              input_probe_batches=1),
                           fit=FitOptions(epochs=4), export=ExportOptions(output=str(root / name))).replaced(**options)
    # The Trainer's seed orders the data; the initial weights come from the process's global generators,
    # whose state depends on which tests ran before in this process (another order under pytest-xdist: a
    # 0.08 vs 0.0 recall once). Seeded here, both models start from the same weights in every order.
    import tf_keras

    tf_keras.utils.set_random_seed(1)
    train(config, echo=lambda _: None)
    evaluate(EvaluatorConfig(model=str(root / name / "model"), examples=str(root / "examples"),
                             output=str(root / f"{name}-eval"), thresholds=("accuracy>=0",)), echo=lambda _: None)
    metrics = json.loads((root / f"{name}-eval" / "metrics.json").read_text())
    return metrics["per_class"]["rare"]["recall"]


def test_balanced_weights_come_from_the_manifest_counts(imbalanced: Path) -> None:
    config = TrainerConfig(input=InputOptions(examples=str(imbalanced / "examples"), class_weight="balanced"),
                           fit=FitOptions(epochs=1), export=ExportOptions(output="unused"))
    task = resolve_task(config.input)
    weights = task_class_weights("balanced", task, "train")
    assert task.class_names == ["common", "rare"] and task.output_names == ["common", "rare", "<OOV>"]
    assert weights == pytest.approx([300 / (2 * 270), 300 / (2 * 30), 1.0])  # one per softmax unit
    assert task_class_weights("rare=4", task, "train") == [1.0, 4.0, 1.0]
    with pytest.raises(ConfigError, match="'bird' is not a class"):
        task_class_weights("bird=2", task, "train")


def test_the_train_stream_carries_each_examples_weight_and_eval_none(imbalanced: Path) -> None:
    """Per example here; per pixel for masks: tests/reader/test_input_stream.py."""
    config = TrainerConfig(input=InputOptions(examples=str(imbalanced / "examples"), class_weight="rare=4",
                                              batch_size=32, deterministic=True),
                           fit=FitOptions(epochs=1), export=ExportOptions(output="unused"))
    task = resolve_task(config.input)
    streams = build_streams(task, config.input, 32, 1, RawToModel(task, None))
    (inputs, ids, weights), = streams.train.take(1).as_numpy_iterator()
    assert set(inputs) == {"x"} and set(ids.tolist()) == {0, 1}
    assert weights.tolist() == [4.0 if i == 1 else 1.0 for i in ids.tolist()]
    assert all(len(element) == 2 for element in streams.eval.take(2))  # no weights in validation


def test_balanced_weights_raise_the_rare_class_recall(imbalanced: Path) -> None:
    plain = _rare_recall(imbalanced, "plain")
    balanced = _rare_recall(imbalanced, "balanced", class_weight="balanced")
    assert balanced >= plain + 0.2, (plain, balanced)
