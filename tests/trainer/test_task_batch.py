"""The batch, the train-time ops and the box loss a run uses when --batch-size, --augment and --box-loss are not
given: the task's (trainer/optimizers.py's `task_batch_size`, `task_augment` and `task_box_loss`, resolved by the
executor before anything is built): a detector's 4, a left-right flip and GIoU, a classifier's 64, none and none;
`augment=()` and `box_loss="l1"` turn a detector's off.

Each run is 2 optimizer steps without evaluation; what is checked is what the run recorded: training.json's input
report (the global batch it streamed), the options shardflow_model.json records, and the steps of an epoch it echoed.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from helpers_images import write_label_pngs
from shardflow.core.manifest import read_manifest
from shardflow.core.model_info import read_model_info
from shardflow.core.storage import read_json
from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, ModelOptions, TrainerConfig, run
from shardflow.trainer.detector import BOX, GIOU_WEIGHT, HEATMAP, LOSS_WEIGHTS, OFFSET, SIZE
from shardflow.trainer.optimizers import DEFAULT_BATCH, TASK_AUGMENT, TASK_BATCH, TASK_BOX_LOSS

pytestmark = pytest.mark.unit  # in process: 2 steps of a small model on tiny images


def _train_unbatched(examples: Path, out: Path, model: ModelOptions | None = None,
                     **options: object) -> tuple[dict, dict, int]:
    """A run without a batch size: training.json, the recorded options, and the steps per epoch it announced."""
    lines: list[str] = []
    run(TrainerConfig(input=InputOptions(examples=str(examples), eval_split=None, input_probe_batches=1, **options),
                      fit=FitOptions(steps=2), export=ExportOptions(output=str(out)), model=model or ModelOptions()),
        echo=lines.append)
    announced = next(re.search(r"(\d+) steps/epoch of (\d+)", line) for line in lines if "steps/epoch" in line)
    assert announced is not None, lines
    summary = read_json(str(out / "training.json"))
    assert int(announced.group(2)) == summary["input_report"]["global_batch"]
    return summary, read_model_info(out / "model").extra["options"], int(announced.group(1))


def test_a_detector_without_a_batch_size_trains_in_batches_of_4(box_examples: Path, tmp_path: Path) -> None:
    summary, options, steps_per_epoch = _train_unbatched(box_examples, tmp_path / "detector")
    assert TASK_BATCH["detection"] == 4
    assert summary["input_report"]["global_batch"] == 4 and options["batch_size"] == 4
    assert steps_per_epoch == math.ceil(read_manifest(box_examples).splits["train"].num_examples / 4)  # 60 for the 240 train images
    assert summary["optimizer_steps"] == 2
    assert TASK_AUGMENT["detection"] == ("flip",)
    assert summary["train_time_augmentation"] == ["flip"] and options["augment"] == ["flip"]
    assert TASK_BOX_LOSS["detection"] == "giou" and options["box_loss"] == "giou"
    assert _box_weight(summary) == pytest.approx(GIOU_WEIGHT, abs=1e-3)  # the model was built with it


def test_a_detector_told_otherwise_trains_without_its_flip_and_giou(box_examples: Path, tmp_path: Path) -> None:
    summary, options, _ = _train_unbatched(box_examples, tmp_path / "plain", ModelOptions(box_loss="l1"), augment=())
    assert summary["train_time_augmentation"] == [] and options["augment"] == []
    assert options["box_loss"] == "l1" and _box_weight(summary) == pytest.approx(0.0, abs=1e-3)


def _box_weight(summary: dict) -> float:
    """The GIoU term's weight in the loss the run minimised: its total less the other weighted parts (Keras logs
    running means, and a mean of sums is the sum of the means)."""
    last = summary["history"][-1]  # the last epoch's logs
    others = sum(LOSS_WEIGHTS[part] * last[f"{part}_loss"] for part in (HEATMAP, SIZE, OFFSET))
    return (last["loss"] - others) / last[f"{BOX}_loss"]


@pytest.fixture(scope="module")
def label_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """16 random 12x10 PNGs of 2 classes through ExampleGen."""
    root = tmp_path_factory.mktemp("classes")
    index = write_label_pngs(root, count=16, classes=2, seed=0)
    example_gen(ExampleGenConfig(indexes=(IndexSpec(str(index), "train"),), data_root=str(root),
                                 output=str(root / "examples")), echo=lambda _: None)
    return root / "examples"


def test_a_classifier_without_a_batch_size_keeps_its_default(label_examples: Path, tmp_path: Path) -> None:
    summary, options, steps_per_epoch = _train_unbatched(label_examples, tmp_path / "classifier")
    assert DEFAULT_BATCH == 64
    assert summary["input_report"]["global_batch"] == 64 and options["batch_size"] == 64
    assert steps_per_epoch == 1  # 16 examples, a batch of 64 from the repeated stream
    assert summary["train_time_augmentation"] == [] and options["augment"] == []
    assert options["box_loss"] is None
