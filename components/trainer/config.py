"""`TrainerConfig`: every option of `shardflow train` in four keyword-only groups, checked when built.

Each group checks its own values in `__post_init__`; `TrainerConfig` checks what spans groups (the
backbone options need a backbone model). Flags, best_hyperparameters.json and the options a model
records keep their flat names (`FLAT_NAMES`: `--model` is `model.name`, the rest keep theirs).

    config = TrainerConfig(input=InputOptions(examples="runs/digits/transform"), fit=FitOptions(epochs=5),
                           export=ExportOptions(output="runs/digits/model"))
    config.input.batch_size   # None: the task's (4 a detector, 64 others) per replica; × replicas globally
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from ..core.errors import ConfigError
from ..core.config_values import require_in_range, require_locations
from ..core.folds import FoldSelection
from ..core.input_checks import check_examples
from .class_weight_option import parse_class_weight

BUILTIN_MODELS = ("auto", "lenet", "unet")
# Pretrained backbones (backbones.py): classifiers, a U-Net on MobileNetV2, any tf_keras.applications model.
BACKBONE_CLASSIFIERS = ("mobilenet_v2", "efficientnet_b0", "resnet50")
BACKBONE_SEGMENTERS = ("unet_mobilenet_v2",)
GENERIC_BACKBONE = "keras_applications:"
# The shuffle holds serialized records (a 224-px JPEG photo ~20 KB): 128 MB mixes ~6k photos or all
# of a 28x28 data set, and the stream holds at most ~4 windows' worth at once.
DEFAULT_SHUFFLE_MB = 128.0
MAX_SHUFFLE_MB = 65_536.0
BOX_LOSSES = ("l1", "giou")  # a detector's box regression (trainer/detector.py)
SCHEDULES = ("constant", "cosine")  # the learning rate over a phase's steps (trainer/optimizers.py)
AUGMENT_OPS = ("flip", "flip_vertical", "rotate", "crop", "brightness", "contrast")
_MODULE_FN = re.compile(r"^([a-z][a-z0-9]*://)?[\w./-]+(\.py)?:[A-Za-z_]\w*$")  # file, URI or module


@dataclass(frozen=True, kw_only=True)
class InputOptions:
    """What the model learns from and how the input stream reads it (the stream's options are made from these).

    `batch_size` is per replica (GPU or worker). `shuffle_buffer_mb`: megabytes (10^6 bytes) of
    serialized records shuffled before they are decoded; the window's example count is derived from
    it and the split's mean record size. `seed` seeds the shuffle, the augmentation and the initial
    weights. `class_weight`: the per-class weights the stream attaches to each training example.
    `train_folds`: only these folds of train_split are trained on (core/folds.py);
    `shardflow find-label-issues` sets it, no flag.
    """

    examples: str
    transform: str | None = None
    label: str | None = None
    num_classes: int | None = None
    train_split: str = "train"
    eval_split: str | None = "eval"
    train_folds: FoldSelection | None = None
    batch_size: int | None = None  # None: the task's (optimizers.task_batch_size)
    shuffle_buffer_mb: float = DEFAULT_SHUFFLE_MB
    augment: tuple[str, ...] | None = None  # None: the task's (optimizers.task_augment); (): none
    augment_on_device: bool = False
    deterministic: bool = False
    seed: int = 0
    class_weight: str | None = None  # "balanced" or "CLASS=WEIGHT,..." (class_weights.py)
    input_probe_batches: int = 50
    # A tf.data service dispatcher: the training stream's per-batch work runs on its workers (input_stream.py).
    data_service: str | None = None

    @property
    def shuffle_bytes(self) -> int:
        """The shuffle budget in bytes.

        >>> InputOptions(examples="e", shuffle_buffer_mb=1.5).shuffle_bytes
        1500000
        """
        return int(self.shuffle_buffer_mb * 1_000_000)

    def __post_init__(self) -> None:
        require_locations(self, "examples")
        for name in ("batch_size", "input_probe_batches", "num_classes"):
            _check_positive(name, getattr(self, name), optional=name != "input_probe_batches")
        if self.num_classes is not None and self.num_classes < 2:
            raise ConfigError(f"num_classes must be >= 2, got {self.num_classes!r}")
        require_in_range("shuffle_buffer_mb", self.shuffle_buffer_mb, f"[0, {MAX_SHUFFLE_MB}]", "MB")
        if self.augment is not None and not isinstance(self.augment, tuple):
            raise ConfigError(f"augment must be a tuple of op names or None, got {self.augment!r}")
        unknown = [op for op in self.augment or () if op not in AUGMENT_OPS]
        if unknown:
            raise ConfigError(f"augment: unknown ops {unknown}; known: {', '.join(AUGMENT_OPS)}")
        if self.eval_split is not None and self.eval_split == self.train_split:
            raise ConfigError(f"eval_split must differ from train_split, both are {self.train_split!r}")
        if self.train_folds is not None and not isinstance(self.train_folds, FoldSelection):
            raise ConfigError(f"train_folds must be a FoldSelection, got {self.train_folds!r}")
        if self.class_weight is not None:
            parse_class_weight(self.class_weight)
        if self.data_service is not None and not re.match(r"^grpc://[^:/\s]+:\d{1,5}$", self.data_service):
            raise ConfigError(f"data_service must be grpc://HOST:PORT (a dispatcher), got {self.data_service!r}")


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """Which model and how it starts and computes. `name` is `--model`.

    `weights` (backbones): "imagenet" (the default), "none", or a weights file (path or URI);
    `backbone_alpha`: MobileNet's width multiplier. `box_loss` (detectors, trainer/detector.py): "l1", CenterNet's
    L1 on sizes alone, or "giou", that plus 1 - GIoU of the box decoded at each centre (None: the task's,
    optimizers.task_box_loss: "giou" for a detector).
    """

    name: str = "auto"
    weights: str | None = None
    backbone_alpha: float = 1.0
    warm_start: str | None = None
    mixed_precision: bool = False
    xla: bool = False
    box_loss: str | None = None

    @property
    def is_backbone(self) -> bool:
        """Whether `name` is a pretrained backbone.

        >>> ModelOptions(name="keras_applications:DenseNet121").is_backbone
        True
        """
        return is_backbone(self.name)

    def __post_init__(self) -> None:
        if self.name not in BUILTIN_MODELS and not self.is_backbone and not _MODULE_FN.match(self.name):
            raise ConfigError(f"model must be one of {BUILTIN_MODELS + BACKBONE_CLASSIFIERS + BACKBONE_SEGMENTERS}, "
                              f"{GENERIC_BACKBONE}NAME or 'module:function' / 'file.py:function', got {self.name!r}")
        if self.box_loss is not None and self.box_loss not in BOX_LOSSES:
            raise ConfigError(f"box_loss must be one of {BOX_LOSSES}, got {self.box_loss!r}")
        if self.weights is not None and (not isinstance(self.weights, str) or not self.weights.strip()):
            raise ConfigError(f"weights must be 'imagenet', 'none' or a weights file, got {self.weights!r}")
        require_in_range("backbone_alpha", self.backbone_alpha, "(0, 2]")


@dataclass(frozen=True, kw_only=True)
class FitOptions:
    """How long and how the model is fitted. `epochs` or `steps` (not both): with `steps`, training stops
    after exactly that many optimizer steps. An epoch is ceil(train examples / global batch) steps of a
    repeated, shuffled stream, so there is never a partial batch in training; evaluation keeps the
    last partial batch. The fine-tuning schedule applies to backbones: `freeze_epochs` of the head
    alone (None: all), then `fine_tune_layers` of the backbone unfrozen from the top (None: all) at
    `fine_tune_learning_rate` (None: learning_rate / 10).

    The recipe (trainer/optimizers.py): `schedule` "constant" or "cosine" (decay to 0 over each phase's
    steps), after `warmup_epochs` of linear warm-up from 0; `ema_momentum` > 0 keeps an exponential moving
    average of the weights, which the model ends with (0: none). None: the task's choice (`task_recipe`).
    """

    epochs: int | None = None
    steps: int | None = None
    learning_rate: float | None = None  # None: the task's (optimizers.py: 0.001, a detector's 0.002)
    checkpoint_every: int = 100
    freeze_epochs: int | None = None
    fine_tune_layers: int | None = None
    fine_tune_learning_rate: float | None = None
    schedule: str | None = None
    warmup_epochs: float | None = None
    ema_momentum: float | None = None

    def __post_init__(self) -> None:
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ConfigError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        require_in_range("warmup_epochs", self.warmup_epochs, "[0, inf)", optional=True)
        require_in_range("ema_momentum", self.ema_momentum, "[0, 1)", "0: no moving average", optional=True)
        if (self.epochs is None) == (self.steps is None):
            raise ConfigError(f"give exactly one of epochs and steps "
                              f"(got epochs={self.epochs!r}, steps={self.steps!r})")
        for name in ("epochs", "steps", "checkpoint_every", "fine_tune_layers"):
            _check_positive(name, getattr(self, name), optional=name != "checkpoint_every")
        for name in ("learning_rate", "fine_tune_learning_rate"):
            require_in_range(name, getattr(self, name), "(0, 10)", optional=True)
        if self.freeze_epochs is not None:
            if isinstance(self.freeze_epochs, bool) or not isinstance(self.freeze_epochs, int) or self.freeze_epochs < 0:
                raise ConfigError(f"freeze_epochs must be an integer >= 0, got {self.freeze_epochs!r}")
            if self.epochs is None or self.freeze_epochs > self.epochs:
                raise ConfigError(f"freeze_epochs ({self.freeze_epochs}) needs --epochs of at least as many "
                                  f"(got epochs={self.epochs!r}, steps={self.steps!r})")


@dataclass(frozen=True, kw_only=True)
class ExportOptions:
    """Where the run writes: `output`, the model directory (model/, reports, checkpoints while it runs);
    `record_order`: a local file listing which examples each step trained on (record_order.py), or None;
    `nms_iou`: a detector's served boxes of one class overlapping a higher-scored one by more are dropped
    (trainer/detection_outputs.py), 0 keeps every heat-map peak."""

    output: str
    record_order: str | None = None
    nms_iou: float = 0.6  # detection_outputs.NMS_IOU (not imported: that module imports TensorFlow)

    def __post_init__(self) -> None:
        require_locations(self, "output")
        order = self.record_order
        if order is not None and (not isinstance(order, str) or not order.strip() or "://" in order):
            raise ConfigError(f"record_order must be a local file (lines are appended as training reads), "
                              f"got {order!r}")
        require_in_range("nms_iou", self.nms_iou, "[0, 1)", "0: no suppression")


# The flat option names (flags, best_hyperparameters.json, the options a model records) → (group, field).
_GROUPS = {"input": InputOptions, "model": ModelOptions, "fit": FitOptions, "export": ExportOptions}
_RENAMED = {("model", "name"): "model"}
FLAT_NAMES: dict[str, tuple[str, str]] = {
    _RENAMED.get((group, f.name), f.name): (group, f.name)
    for group, kind in _GROUPS.items() for f in dataclasses.fields(kind)}


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Options of one training run, in four groups; `hyperparameters` is a best_hyperparameters.json whose
    values replace the groups' (run() reads it).

    The stream builder sees the input group alone (input_pipeline.py makes its StreamOptions from it).
    """

    input: InputOptions
    fit: FitOptions
    export: ExportOptions
    model: ModelOptions = ModelOptions()
    hyperparameters: str | None = None

    def check_inputs(self) -> None:
        """The checks that read storage, before the heavy imports: --examples is the right kind of output."""
        check_examples(self.input.examples, transform_ok=True)

    def flat(self) -> dict[str, Any]:
        """Every option by its flat name (the flag's, in snake_case), as a model's shardflow_model.json records them."""
        values = {name: getattr(getattr(self, group), field) for name, (group, field) in FLAT_NAMES.items()}
        return {**values, "hyperparameters": self.hyperparameters}

    def replaced(self, **values: Any) -> TrainerConfig:
        """This config with options replaced by flat name (`output=`, `epochs=`, `learning_rate=`, ...), checked again.

        >>> base = TrainerConfig(input=InputOptions(examples="e"), fit=FitOptions(epochs=1),
        ...                      export=ExportOptions(output="m"))
        >>> base.replaced(output="m2", steps=5, epochs=None).fit.steps
        5
        """
        unknown = sorted(set(values) - set(FLAT_NAMES) - {"hyperparameters"})
        if unknown:
            raise ConfigError(f"unknown Trainer options {unknown}")
        changes: dict[str, dict[str, Any]] = {}
        for name, value in values.items():
            if name != "hyperparameters":
                group, field = FLAT_NAMES[name]
                changes.setdefault(group, {})[field] = value
        groups = {group: dataclasses.replace(getattr(self, group), **fields) for group, fields in changes.items()}
        return dataclasses.replace(self, **groups, **({"hyperparameters": values["hyperparameters"]}
                                                      if "hyperparameters" in values else {}))

    def __post_init__(self) -> None:
        for group, kind in _GROUPS.items():
            if not isinstance(getattr(self, group), kind):
                raise ConfigError(f"{group} must be a {kind.__name__}, got {getattr(self, group)!r}")
        given = [name for name in ("weights", "freeze_epochs", "fine_tune_layers", "fine_tune_learning_rate")
                 if self.flat()[name] is not None] + (["backbone_alpha"] if self.model.backbone_alpha != 1.0 else [])
        if given and not self.model.is_backbone:
            raise ConfigError(f"{given[0]} applies to a pretrained backbone (--model mobilenet_v2, ...), "
                              f"not to model {self.model.name!r}")
        if self.input.data_service and self.export.record_order:
            raise ConfigError("record_order cannot be written by the tf.data service's workers: drop --record-order "
                              "or --data-service")


def is_backbone(model: str) -> bool:
    """Whether `--model` names a built-in pretrained backbone model.

    >>> is_backbone("mobilenet_v2"), is_backbone("unet_mobilenet_v2"), is_backbone("lenet")
    (True, True, False)
    """
    return model in BACKBONE_CLASSIFIERS or model in BACKBONE_SEGMENTERS or model.startswith(GENERIC_BACKBONE)


def _check_positive(name: str, value: object, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
