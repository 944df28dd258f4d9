"""Builds and compiles the model: a built-in one chosen from the task, or a user's `module:function`.

A user hook is called as `build_model(features, num_classes, task)` with `features` the manifest's
FeatureSpecs of what the model receives (the image is the input, named like the feature) and
`task` "classification" or "segmentation"; it returns a tf-keras Model taking a dict
`{input_name: float32 [B, H, W, C]}` and giving softmax probabilities. For "detection" (boxes) it returns
detector.py's maps (a CenterNetModel: heat-map, size, offset); `auto` builds detector.py's CenterNet on its tiny
backbone, a pretrained backbone puts the same heads on its stride-4 or stride-8 features. `num_classes` counts softmax
units (`task.num_outputs`): a string label's classes plus its OOV id, which the export does not serve.
It may compile the model itself; an uncompiled model gets Adam and sparse categorical cross-entropy.

    model = build_model(task, config)   # warm-started if asked, compiled; call in the strategy scope
"""
from __future__ import annotations

from typing import Callable

import tf_keras as keras

from ..core.box_schema import DETECTION_TASK
from ..core.errors import ConfigError
from .augment import AugmentLayer
from .config import BACKBONE_CLASSIFIERS, BACKBONE_SEGMENTERS, TrainerConfig
from .export import warm_start
from .metrics import training_metrics
from .models import lenet, unet
from .optimizers import CONSTANT, Recipe, adam, task_recipe
from .task import TrainingTask

BUILTIN_DETECTORS = ("auto",)  # the names that build detector.py's CenterNet on a detection task


def build_model(task: TrainingTask, config: TrainerConfig) -> keras.Model:
    """The architecture, warm-started from `config.model.warm_start` (before compiling: weights only), compiled.

    Its initial weights come from `config.input.seed` (Python's, NumPy's and TensorFlow's generators): two runs
    with the same seed start from the same weights, so a run repeats its metrics.
    """
    keras.utils.set_random_seed(config.input.seed)
    model = _architecture(task, config)
    if config.input.augment and config.input.augment_on_device:
        model = _with_augment_layer(model, task, config)
    if config.model.warm_start:
        warm_start(model, config.model.warm_start)
    if not model.optimizer:
        compile_model(model, task, config, recipe_of(task, config).learning_rate)
    if not _is_user_model(config):
        trace_without_autograph(model)
    return model


def _is_user_model(config: TrainerConfig) -> bool:
    return config.model.name not in ("auto", "lenet", "unet") and not config.model.is_backbone


def trace_without_autograph(model: keras.Model) -> None:
    """Keras' training and test steps traced as written, not rewritten by autograph first.

    Autograph converts every function the first `fit` traces, ~450 of tf_keras' own: measured 11.9 s
    of a LeNet's first 2-epoch fit on 2 cores, 1.1 s without (same losses). The built-in models are
    functional Keras with no Python branch on a tensor, so nothing needs converting; a user's model
    (`--model file.py:fn`) keeps autograph, as its layers may branch on tensors.
    """
    import tensorflow as tf

    for name in ("train_step", "test_step"):
        setattr(model, name, tf.autograph.experimental.do_not_convert(getattr(model, name)))


def recipe_of(task: TrainingTask, config: TrainerConfig) -> Recipe:
    """The run's schedule, warm-up and moving average: the flags', else the task's (optimizers.py); a user's
    model (`--model file.py:fn`) keeps the plain recipe, as it may have compiled its own optimizer."""
    fit = config.fit
    if _is_user_model(config):
        return CONSTANT._replace(learning_rate=fit.learning_rate or CONSTANT.learning_rate)
    return task_recipe(task.kind, fit.learning_rate, fit.schedule, fit.warmup_epochs, fit.ema_momentum)


def compile_model(model: keras.Model, task: TrainingTask, config: TrainerConfig, learning_rate: float,
                  phase_steps: int = 0, steps_per_epoch: int = 0) -> None:
    """Adam (optimizers.py: under the run's recipe over a phase of `phase_steps`), sparse categorical cross-entropy
    and the task's metrics (under mixed precision Keras wraps the optimizer in a LossScaleOptimizer itself).
    A detector's loss and its parts are its own (detector.py)."""
    optimizer = adam(learning_rate, recipe_of(task, config), phase_steps, steps_per_epoch)
    if task.kind == DETECTION_TASK:
        model.compile(optimizer=optimizer, jit_compile=config.model.xla)
        return
    model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(),
                  metrics=training_metrics(task.kind, task.num_outputs), jit_compile=config.model.xla)


def _architecture(task: TrainingTask, config: TrainerConfig) -> keras.Model:
    shape = tuple(task.input_spec.shape)
    name = config.model.name
    if task.kind == DETECTION_TASK and (name in BUILTIN_DETECTORS or config.model.is_backbone):
        return _detector(task, config)
    if name in ("lenet", "unet") and task.kind == DETECTION_TASK:
        raise ConfigError(f"model {name!r} does not detect boxes; use auto (a CenterNet detector) or "
                          "mobilenet_v2 / efficientnet_b0")
    if name == "auto":
        name = "unet" if task.kind == "segmentation" else "lenet"
    if config.model.is_backbone:
        return _backbone_model(task, config)
    if name == "lenet":
        if task.kind != "classification":
            raise ConfigError(f"model 'lenet' classifies images but the target {task.target!r} is a mask; use unet")
        return lenet(task.input_name, shape, task.num_outputs)
    if name == "unet":
        if task.kind != "segmentation":
            raise ConfigError(f"model 'unet' segments images but the target {task.target!r} is a label; use lenet")
        return unet(task.input_name, shape, task.num_outputs)
    model = _user_hook(name)(dict(task.train_manifest.features), task.num_outputs, task.kind)
    if not isinstance(model, keras.Model):
        raise ConfigError(f"model hook {name!r} returned {type(model).__name__}, not a tf_keras.Model "
                          "(use `import tf_keras as keras`, not Keras 3)")
    return model


def _detector(task: TrainingTask, config: TrainerConfig) -> keras.Model:
    """CenterNet heads (detector.py) on the tiny backbone (`auto`) or on a pretrained backbone's feature map."""
    from .detector import BOX, GIOU_WEIGHT, build_detector, tiny_backbone

    shape = tuple(task.input_spec.shape)
    weights = {BOX: GIOU_WEIGHT} if config.model.box_loss == "giou" else None  # None: CenterNet's L1 alone
    if not config.model.is_backbone:
        return build_detector(tiny_backbone(shape), task.num_classes, task.input_name, loss_weights=weights)
    from . import backbones  # tf_keras.applications: only for these models

    spec = backbones.backbone_spec(config.model.name)
    features = backbones.detection_features(spec, shape, config.model.weights or "imagenet", config.model.backbone_alpha)
    preprocess = backbones.BackbonePreprocess(spec.module, name="backbone_preprocess")
    return build_detector(features, task.num_classes, task.input_name, preprocess=preprocess, loss_weights=weights)


def _backbone_model(task: TrainingTask, config: TrainerConfig) -> keras.Model:
    from . import backbones  # tf_keras.applications: only for these models

    spec, shape = backbones.backbone_spec(config.model.name), tuple(task.input_spec.shape)
    weights = config.model.weights or "imagenet"
    segmenter = config.model.name in BACKBONE_SEGMENTERS
    if task.kind == "segmentation" and not segmenter:
        raise ConfigError(f"model {config.model.name!r} classifies images but the target {task.target!r} is a mask; "
                          f"use {', '.join(BACKBONE_SEGMENTERS)}")
    if task.kind == "classification" and segmenter:
        raise ConfigError(f"model {config.model.name!r} segments images but the target {task.target!r} is a label; "
                          f"use {', '.join(BACKBONE_CLASSIFIERS)}")
    build = backbones.unet_on_backbone if segmenter else backbones.classifier
    return build(spec, task.input_name, shape, task.num_outputs, weights, config.model.backbone_alpha)


def _user_hook(reference: str) -> Callable:
    from ..core.user_module import load_function  # Beam's pickler: only needed for user code

    module, function = reference.rsplit(":", 1)
    return load_function(module, function)


def _with_augment_layer(model: keras.Model, task: TrainingTask, config: TrainerConfig) -> keras.Model:
    if task.kind != "classification":
        raise ConfigError("augment_on_device works for classification only: a model layer cannot move the masks "
                          "with the images; augment segmentation in the input pipeline (the default)")
    inputs = keras.Input(shape=tuple(task.input_spec.shape), name=task.input_name, dtype="float32")
    augmented = AugmentLayer(config.input.augment, config.input.seed, name="augment")(inputs)
    return keras.Model(inputs, model(augmented), name=f"{model.name}_augmented")


def detector_grid(model: keras.Model) -> tuple[int, int]:
    """(rows, columns) of a detector's heat-map: the grid its stream's targets are made for."""
    from .detector import HEATMAP

    try:
        shape = model.get_layer(HEATMAP).output_shape
    except ValueError:
        raise ConfigError(f"a detection model must output a {HEATMAP!r} map (detector.py's heads); "
                          f"{model.name!r} has no layer of that name") from None
    if len(shape) != 4 or None in shape[1:3]:
        raise ConfigError(f"the detector's {HEATMAP!r} map must be [B, rows, columns, classes], got {shape}")
    return int(shape[1]), int(shape[2])
