"""`TrainerConfig`: every option of `shardflow train`, checked when it is built.

    config = TrainerConfig(examples="runs/digits/transform", output="runs/digits/model", epochs=5)
    config.batch_size   # 64 examples per replica; the global batch is 64 × replicas
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.config_values import require_locations
from ..core.folds import FoldSelection
from ..core.input_checks import check_examples

BUILTIN_MODELS = ("auto", "lenet", "unet")
# Pretrained backbones (backbones.py): classifiers, a U-Net on MobileNetV2, any tf_keras.applications model.
BACKBONE_CLASSIFIERS = ("mobilenet_v2", "efficientnet_b0", "resnet50")
BACKBONE_SEGMENTERS = ("unet_mobilenet_v2",)
GENERIC_BACKBONE = "keras_applications:"
# The shuffle holds serialized records (a 224-px JPEG photo ~20 KB): 128 MB mixes ~6k photos or all
# of a 28x28 data set, and the stream holds at most ~4 windows' worth at once.
DEFAULT_SHUFFLE_MB = 128.0
MAX_SHUFFLE_MB = 65_536.0
AUGMENT_OPS = ("flip", "flip_vertical", "rotate", "crop", "brightness", "contrast")
_MODULE_FN = re.compile(r"^([a-z][a-z0-9]*://)?[\w./-]+(\.py)?:[A-Za-z_]\w*$")  # file, URI or module


@dataclass(frozen=True)
class TrainerConfig:
    """Options of one training run. `batch_size` is per replica (GPU or worker).

    `shuffle_buffer_mb`: megabytes (10^6 bytes) of serialized records shuffled before they are
    decoded; the window's example count is derived from it and the split's mean record size.
    `epochs` or `steps` (not both): with `steps`, training stops after exactly that many optimizer
    steps. An epoch is ceil(train examples / global batch) steps of a repeated, shuffled stream, so
    there is never a partial batch in training; evaluation keeps the last partial batch.
    """

    examples: str
    output: str
    transform: str | None = None
    model: str = "auto"
    epochs: int | None = None
    steps: int | None = None
    batch_size: int = 64
    shuffle_buffer_mb: float = DEFAULT_SHUFFLE_MB
    augment: tuple[str, ...] = ()
    augment_on_device: bool = False
    seed: int = 0
    deterministic: bool = False
    warm_start: str | None = None
    mixed_precision: bool = False
    xla: bool = False
    learning_rate: float = 1e-3
    checkpoint_every: int = 100
    label: str | None = None
    num_classes: int | None = None
    train_split: str = "train"
    eval_split: str | None = "eval"
    input_probe_batches: int = 50
    weights: str | None = None  # backbones: "imagenet" (the default), "none", or a weights file (path or URI)
    backbone_alpha: float = 1.0  # MobileNet's width multiplier
    freeze_epochs: int | None = None  # backbones: epochs of the head alone; the rest fine-tune (None: all)
    fine_tune_layers: int | None = None  # layers of the backbone unfrozen in phase two, from the top (None: all)
    fine_tune_learning_rate: float | None = None  # phase two's (None: learning_rate / 10)
    class_weight: str | None = None  # "balanced" or "CLASS=WEIGHT,..." (class_weights.py)
    hyperparameters: str | None = None  # a best_hyperparameters.json whose values replace these (run() reads it)
    # Only these folds of train_split are trained on (core/folds.py); `shardflow find-label-issues` sets it, no flag.
    train_folds: FoldSelection | None = None

    @property
    def is_backbone(self) -> bool:
        """Whether `model` is a pretrained backbone.

        >>> TrainerConfig(examples="e", output="m", epochs=1, model="keras_applications:DenseNet121").is_backbone
        True
        """
        return is_backbone(self.model)

    @property
    def shuffle_bytes(self) -> int:
        """The shuffle budget in bytes.

        >>> TrainerConfig(examples="e", output="m", epochs=1, shuffle_buffer_mb=1.5).shuffle_bytes
        1500000
        """
        return int(self.shuffle_buffer_mb * 1_000_000)

    def check_inputs(self) -> None:
        """The checks that read storage, before the heavy imports: --examples is the right kind of output."""
        check_examples(self.examples, transform_ok=True)

    def __post_init__(self) -> None:
        require_locations(self, "examples", "output")
        if self.model not in BUILTIN_MODELS and not self.is_backbone and not _MODULE_FN.match(self.model):
            raise ConfigError(f"model must be one of {BUILTIN_MODELS + BACKBONE_CLASSIFIERS + BACKBONE_SEGMENTERS}, "
                              f"{GENERIC_BACKBONE}NAME or 'module:function' / 'file.py:function', got {self.model!r}")
        if (self.epochs is None) == (self.steps is None):
            raise ConfigError(f"give exactly one of epochs and steps (got epochs={self.epochs!r}, steps={self.steps!r})")
        for name in ("epochs", "steps", "batch_size", "checkpoint_every", "input_probe_batches", "num_classes"):
            _check_positive(name, getattr(self, name), optional=name in ("epochs", "steps", "num_classes"))
        if self.num_classes is not None and self.num_classes < 2:
            raise ConfigError(f"num_classes must be >= 2, got {self.num_classes!r}")
        mb = self.shuffle_buffer_mb
        if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not 0 <= mb <= MAX_SHUFFLE_MB:
            raise ConfigError(f"shuffle_buffer_mb must be a number of MB in [0, {MAX_SHUFFLE_MB}], got {mb!r}")
        if not isinstance(self.augment, tuple):
            raise ConfigError(f"augment must be a tuple of op names, got {self.augment!r}")
        unknown = [op for op in self.augment if op not in AUGMENT_OPS]
        if unknown:
            raise ConfigError(f"augment: unknown ops {unknown}; known: {', '.join(AUGMENT_OPS)}")
        if not (isinstance(self.learning_rate, (int, float)) and 0 < self.learning_rate < 10):
            raise ConfigError(f"learning_rate must be in (0, 10), got {self.learning_rate!r}")
        if self.eval_split is not None and self.eval_split == self.train_split:
            raise ConfigError(f"eval_split must differ from train_split, both are {self.train_split!r}")
        if self.train_folds is not None and not isinstance(self.train_folds, FoldSelection):
            raise ConfigError(f"train_folds must be a FoldSelection, got {self.train_folds!r}")
        self._check_backbone_options()

    def _check_backbone_options(self) -> None:
        given = [name for name in ("weights", "freeze_epochs", "fine_tune_layers", "fine_tune_learning_rate")
                 if getattr(self, name) is not None] + (["backbone_alpha"] if self.backbone_alpha != 1.0 else [])
        if given and not self.is_backbone:
            raise ConfigError(f"{given[0]} applies to a pretrained backbone (--model mobilenet_v2, ...), "
                              f"not to model {self.model!r}")
        if self.weights is not None and (not isinstance(self.weights, str) or not self.weights.strip()):
            raise ConfigError(f"weights must be 'imagenet', 'none' or a weights file, got {self.weights!r}")
        alpha = self.backbone_alpha
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha <= 2:
            raise ConfigError(f"backbone_alpha must be in (0, 2], got {alpha!r}")
        for name in ("fine_tune_layers",):
            _check_positive(name, getattr(self, name), optional=True)
        if self.freeze_epochs is not None:
            if isinstance(self.freeze_epochs, bool) or not isinstance(self.freeze_epochs, int) or self.freeze_epochs < 0:
                raise ConfigError(f"freeze_epochs must be an integer >= 0, got {self.freeze_epochs!r}")
            if self.epochs is None or self.freeze_epochs > self.epochs:
                raise ConfigError(f"freeze_epochs ({self.freeze_epochs}) needs --epochs of at least as many "
                                  f"(got epochs={self.epochs!r}, steps={self.steps!r})")
        rate = self.fine_tune_learning_rate
        if rate is not None and not (isinstance(rate, (int, float)) and 0 < rate < 10):
            raise ConfigError(f"fine_tune_learning_rate must be in (0, 10), got {rate!r}")
        if self.class_weight is not None:
            parse_class_weight(self.class_weight)


def is_backbone(model: str) -> bool:
    """Whether `--model` names a built-in pretrained backbone model.

    >>> is_backbone("mobilenet_v2"), is_backbone("unet_mobilenet_v2"), is_backbone("lenet")
    (True, True, False)
    """
    return model in BACKBONE_CLASSIFIERS or model in BACKBONE_SEGMENTERS or model.startswith(GENERIC_BACKBONE)


def parse_class_weight(text: str) -> str | dict[str, float]:
    """`--class-weight`: "balanced", or CLASS=WEIGHT pairs (class ids or names, weights > 0).

    >>> parse_class_weight("balanced"), parse_class_weight("0=1, 1=4.5")
    ('balanced', {'0': 1.0, '1': 4.5})
    """
    if text.strip() == "balanced":
        return "balanced"
    weights: dict[str, float] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = pair.partition("=")
        try:
            weight = float(value)
        except ValueError:
            weight = -1.0
        if not sep or not name.strip() or not weight > 0 or name.strip() in weights:
            raise ConfigError(f"class_weight {text!r}: expected 'balanced' or CLASS=WEIGHT pairs with weights > 0, "
                              f"each class once (at {pair!r})")
        weights[name.strip()] = weight
    if not weights:
        raise ConfigError(f"class_weight {text!r}: expected 'balanced' or CLASS=WEIGHT pairs")
    return weights


def _check_positive(name: str, value: object, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
