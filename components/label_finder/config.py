"""`LabelFinderConfig`: every option of `shardflow find-label-issues`, checked when it is built.

The fold models are Trainer runs: `train` holds their options (every `shardflow train` flag); each
fold's run gets its own output and the folds it trains on.

>>> from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
>>> train = TrainerConfig(input=InputOptions(examples="runs/examples"), fit=FitOptions(epochs=5),
...                       export=ExportOptions(output="runs/issues"))
>>> config = LabelFinderConfig(train=train, output="runs/issues")
>>> config.folds, config.rule, config.fold_trainer_config(1, "w/1").input.train_folds.folds
(3, 'noise_rate', (0, 2))
>>> LabelFinderConfig(train=train, output="runs/issues", folds=1)
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: folds must be an integer >= 2, got 1
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core.batch_memory import SCORING_BUDGET_MB
from ..core.box_issues import DEFAULT_IOU
from ..core.config_values import require_apart, require_locations, require_positive
from ..core.errors import ConfigError
from ..core.folds import FoldSelection
from ..core.manifest import read_manifest
from ..trainer.config import TrainerConfig
from ..trainer.task import resolve_task

RULES = ("noise_rate", "off_diagonal")  # core.label_issues.find_label_issues' rules
SUMMARY_NAME = "label_issues.json"  # the completion marker, written last
ISSUES_NAME = "label_issues.jsonl"
FOLDS_DIR = "folds"  # the fold models and their predictions, published with keep_models
PICTURES_DIR = "pictures"  # boxes: a PNG per listed image
DEFAULT_PICTURES = 100


@dataclass(frozen=True, kw_only=True)
class LabelFinderConfig:
    """`train`: the fold models' Trainer options (its `output` is replaced by each fold's own).
    `folds`: K, each a model trained on the other K-1 folds of `train.train_split` (seeded by
    `train.seed`). `rule`: confident learning's rule (core/label_issues.py). `keep_models`: publish
    each fold's training output and predictions under OUT/folds/<k>/. `memory_mb`: predict's
    activations budget per model call. Boxes (core/box_issues.py): `box_iou`, the IoU at which a detection
    covers a given box; `pictures`, how many listed images get a PNG (the first ones)."""

    train: TrainerConfig
    output: str
    folds: int = 3
    rule: str = "noise_rate"
    keep_models: bool = False
    memory_mb: float = SCORING_BUDGET_MB
    box_iou: float = DEFAULT_IOU  # boxes: the IoU at which a detection covers a given box
    pictures: int = DEFAULT_PICTURES  # boxes: PNGs of the first listed images, at most

    def __post_init__(self) -> None:
        require_locations(self, "output")
        if not isinstance(self.train, TrainerConfig):
            raise ConfigError(f"train must be a TrainerConfig, got {self.train!r}")
        self.training_folds(0)  # folds: an integer >= 2
        if self.rule not in RULES:
            raise ConfigError(f"rule must be one of {RULES}, got {self.rule!r}")
        require_positive("memory_mb", self.memory_mb, "megabytes")
        if isinstance(self.box_iou, bool) or not isinstance(self.box_iou, (int, float)) or not 0 < self.box_iou < 1:
            raise ConfigError(f"box_iou must be a number between 0 and 1 (exclusive), got {self.box_iou!r}")
        if isinstance(self.pictures, bool) or not isinstance(self.pictures, int) or self.pictures < 0:
            raise ConfigError(f"pictures must be an integer >= 0, got {self.pictures!r}")
        if self.train.model.warm_start is not None:
            raise ConfigError(f"warm_start {self.train.model.warm_start!r}: a fold model must not start from weights "
                              "that may have seen its held-out rows; drop --warm-start")
        if self.train.input.train_folds is not None:
            raise ConfigError("train.train_folds is set per fold by find-label-issues; leave it None")
        require_apart(self.output, examples=self.train.input.examples, transform=self.train.input.transform)

    @property
    def seed(self) -> int:
        """The fold assignment's seed: the Trainer's --seed."""
        return self.train.input.seed

    def training_folds(self, fold: int) -> FoldSelection:
        """What fold `fold`'s model trains on: every other fold."""
        return FoldSelection.training(self.folds, fold, self.seed)

    def held_out(self, fold: int) -> FoldSelection:
        """What fold `fold`'s model predicts."""
        return FoldSelection.held_out(self.folds, fold, self.seed)

    def fold_trainer_config(self, fold: int, output: str) -> TrainerConfig:
        """The Trainer's config of fold `fold`'s model, trained into `output`."""
        return self.train.replaced(output=output, train_folds=self.training_folds(fold))

    def check_inputs(self) -> None:
        """The checks that read storage (manifests only): the Trainer's, a label to find issues in, enough examples."""
        self.train.check_inputs()
        task = resolve_task(self.train.input)
        if task.kind == "segmentation":
            raise ConfigError(f"find-label-issues ranks class labels and boxes; the target {task.target!r} is a mask "
                              "(the Evaluator scores masks' label issues on its eval split)")
        split = self.train.input.train_split
        examples = task.train_manifest.splits[split].num_examples
        raw = read_manifest(task.raw_dir).splits[split].num_examples
        if raw != examples:
            raise ConfigError(f"split {split!r}: {task.train_dir} has {examples} examples but its raw examples "
                              f"{task.raw_dir} have {raw}; positions would not match")
        if examples < self.folds:
            raise ConfigError(f"folds {self.folds} needs at least {self.folds} {split} examples, "
                              f"{task.train_dir} has {examples}")
