"""`shardflow train`: translates command-line flags into a TrainerConfig's groups. Nothing else.

    shardflow train --examples runs/digits/transform --output runs/digits/model --epochs 5 \
        [--model lenet|unet|my_module.py:build_model] [--batch-size N] [--augment flip,rotate]

With TF_CONFIG in the environment (a Kubeflow TFJob sets it) every worker runs this same command
and they train together (MultiWorkerMirroredStrategy); the chief (worker 0) writes the outputs.
"""
from __future__ import annotations

import argparse

from ..core.errors import ConfigError
from ..core.pipeline_flags import expose
from .config import (AUGMENT_OPS, BOX_LOSSES, DEFAULT_SHUFFLE_MB, SCHEDULES, ExportOptions, FitOptions,
                     InputOptions, ModelOptions, TrainerConfig)


def _ops(text: str) -> tuple[str, ...]:
    if text.strip() == "none":
        return ()
    ops = tuple(op.strip() for op in text.split(",") if op.strip())
    if not ops:
        raise ConfigError(f"--augment expects comma-separated ops from {', '.join(AUGMENT_OPS)}, got {text!r}")
    return ops


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--examples", required=True, help="Transform output (materialized) or ExampleGen output")
    add("--transform", help="Transform output whose graph is applied on the fly to raw --examples")
    add("--output", required=True, help="model directory: model/, history.json, curves.png, input_report.json")
    add("--model", default="auto", help="lenet, unet, or path/to/file.py:function / package.module:function "
                                        "(default auto: unet for a mask target, a CenterNet detector for boxes, lenet for a label)")
    steps = parser.add_mutually_exclusive_group(required=True)
    steps.add_argument("--epochs", type=int, help="epochs of ceil(train examples / global batch) steps")
    steps.add_argument("--steps", type=int, help="exact number of optimizer steps")
    add("--batch-size", type=int, default=None,
        help="examples per replica and step (default: the task's, 4 for a detector, 64 otherwise)")
    add("--shuffle-buffer-mb", type=float, default=DEFAULT_SHUFFLE_MB,
        help=f"MB of serialized records shuffled before decoding (default {DEFAULT_SHUFFLE_MB:g}; 0 = no shuffle)")
    add("--augment", type=_ops, default=None, metavar="OPS",
        help=f"train-time ops: {','.join(AUGMENT_OPS)}, or none (default: flip for a detector, none otherwise)")
    add("--augment-on-device", action="store_true", help="augment in a Keras layer in the model (classification)")
    add("--seed", type=int, default=0, help="seed of the initial weights, shuffling and augmentation")
    add("--deterministic", action="store_true",
        help="the same weights from the same seed on the same devices: TensorFlow's op determinism (GPUs "
             "included) and an input order that does not depend on timing (slower)")
    add("--warm-start", metavar="MODEL_DIR", help="initialize the weights from an earlier exported model")
    add("--mixed-precision", action="store_true", help="mixed precision: float16 compute on GPUs, bfloat16 on CPUs")
    add("--xla", action="store_true", help="compile the training step with XLA")
    add("--learning-rate", type=float, help="Adam's (the peak under a schedule; default: the task's, 0.001, a "
                                            "detector's 0.002)")
    recipe = parser.add_argument_group("the recipe (default: the task's; a detector's: cosine from 0.002 after 1 warm-up epoch)")
    recipe.add_argument("--schedule", choices=SCHEDULES, help="the learning rate over each phase: constant, or "
                                                               "cosine decay to 0 (default: the task's)")
    recipe.add_argument("--warmup-epochs", type=float, help="epochs of linear warm-up from 0 (default: the task's)")
    recipe.add_argument("--ema-momentum", type=float, help="keep a moving average of the weights with this momentum "
                                                           "and end with it; 0 = none (default: the task's)")
    recipe.add_argument("--box-loss", choices=BOX_LOSSES, help="a detector's box loss: l1 (CenterNet's sizes) or giou "
                                                               "(that plus 1 - GIoU at the centres; default: giou)")
    add("--checkpoint-every", type=int, default=100, help="steps between checkpoints (and at every epoch end)")
    add("--label", help="target feature, image/object for boxes (default: the mask, else the boxes, else the only label)")
    add("--num-classes", type=int, help="number of classes (default: from the manifests)")
    add("--input-probe-batches", type=int, default=50, help="at most this many batches (and 1 s) read to time the input pipeline alone")
    backbone = parser.add_argument_group("pretrained backbones (--model mobilenet_v2, efficientnet_b0, resnet50, "
                                         "unet_mobilenet_v2, keras_applications:NAME)")
    backbone.add_argument("--weights", help="imagenet (default; downloaded by Keras), none, or a weights file "
                                            "(.h5 or TF checkpoint; path or s3:// / gs:// URI)")
    backbone.add_argument("--backbone-alpha", type=float, default=1.0, help="MobileNet's width multiplier")
    backbone.add_argument("--freeze-epochs", type=int, help="epochs training the head with the backbone frozen; "
                                                            "the rest fine-tune (default: all epochs frozen)")
    backbone.add_argument("--fine-tune-layers", type=int, help="backbone layers unfrozen from the top in phase two "
                                                               "(default all; BatchNorm stays frozen)")
    backbone.add_argument("--fine-tune-learning-rate", type=float, help="phase two's (default --learning-rate / 10)")
    add("--class-weight", metavar="balanced|CLASS=W,...",
        help="loss weight per class: 'balanced' (from train's label counts) or e.g. 0=1,1=5 / cat=1,dog=3")
    add("--hyperparameters", metavar="FILE", help="best_hyperparameters.json from shardflow tune: its values "
                                                  "replace these flags' (path or URI)")
    add("--train-split", default="train")
    add("--eval-split", default="eval", help="split validated on each epoch ('' for none)")
    expose(add("--data-service", metavar="grpc://HOST:PORT",
               help="a tf.data service dispatcher (shardflow data-service): the training batches are made on its "
                    "workers, in the order a local stream makes them"))
    add("--nms-iou", type=float, default=0.6, metavar="IOU",
        help="a detector's served boxes: drop a box overlapping a higher-scored box of its class by more than IOU "
             "(class-aware non-maximum suppression, default 0.6; 0 turns it off)")
    add("--record-order", metavar="FILE", help="write which examples each step trained on (JSON lines: shard, "
                                               "record, CSV row) to this local file; off by default")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> TrainerConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    inputs = InputOptions(
        examples=args.examples, transform=args.transform, label=args.label, num_classes=args.num_classes,
        train_split=args.train_split, eval_split=args.eval_split or None, batch_size=args.batch_size,
        shuffle_buffer_mb=args.shuffle_buffer_mb, augment=args.augment, augment_on_device=args.augment_on_device,
        deterministic=args.deterministic, seed=args.seed, class_weight=args.class_weight,
        input_probe_batches=args.input_probe_batches, data_service=args.data_service)
    model = ModelOptions(name=args.model, weights=args.weights, backbone_alpha=args.backbone_alpha,
                         warm_start=args.warm_start, mixed_precision=args.mixed_precision, xla=args.xla,
                         box_loss=args.box_loss)
    fit = FitOptions(epochs=args.epochs, steps=args.steps, learning_rate=args.learning_rate,
                     checkpoint_every=args.checkpoint_every, freeze_epochs=args.freeze_epochs,
                     fine_tune_layers=args.fine_tune_layers, fine_tune_learning_rate=args.fine_tune_learning_rate,
                     schedule=args.schedule, warmup_epochs=args.warmup_epochs, ema_momentum=args.ema_momentum)
    export = ExportOptions(output=args.output, record_order=args.record_order, nms_iou=args.nms_iou)
    return TrainerConfig(input=inputs, model=model, fit=fit, export=export, hyperparameters=args.hyperparameters)
