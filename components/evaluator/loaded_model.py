"""Loading an exported model (see `shardflow.core.model_info`) and checking it keeps the contract.

    model = load_model("runs/train/model", "model", task_for)   # or "s3://bucket/runs/train/model"
    model.info.task, model.info.num_classes      # from shardflow_model.json
    model.label_map                              # a detector's: its label_map.pbtxt (core/label_map_file.py)
    model.signature(examples=records)            # {"probabilities": ..., "class_ids": ...}

Every problem is an `EvaluationError` naming the directory: no `shardflow_model.json`, no SavedModel,
no `serving_default` signature, a signature that does not take `examples`, or whose outputs break its kind's
contract: the model's task (`task_of(info.task)`: the registry's `tasks.task_for`, handed in by the caller, as
this module is part of the engine the tasks import) checks them (`Task.check_served_outputs`: labels and masks
through `check_probability_outputs` here) and reads what it serves beside them (`Task.served_label_map`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import tensorflow as tf

from ..core.box_schema import LabelMap
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.model_info import SERVING_INPUT, SERVING_SIGNATURE, ModelInfo, read_model_info
from .outputs import EvaluationError

OUTPUTS = ("probabilities", "class_ids")


@dataclass(frozen=True)
class LoadedModel:
    path: str
    info: ModelInfo
    module: Any  # the loaded SavedModel object; keeps the signature's variables alive
    signature: Any  # ConcreteFunction: examples=tf.string [N] -> {"probabilities", "class_ids"}
    label_map: LabelMap | None = None  # a detector's: the ids it serves

    def call(self, records: Sequence[bytes], **options: Any) -> dict[str, Any]:
        """The signature on a list of serialized examples (what batch sizing and predict call)."""
        return self.signature(examples=tf.constant(list(records), dtype=tf.string), **options)


def _read_info(path: str, role: str) -> ModelInfo:
    try:
        return read_model_info(path)
    except (FileNotFoundError, json.JSONDecodeError, KeyError, TypeError, ValueError) as err:
        raise EvaluationError(f"{role} {path}: cannot read its model info: {err}") from err


def _check_inputs(path: str, role: str, signature: Any) -> None:
    _, inputs = signature.structured_input_signature
    if set(inputs) != {SERVING_INPUT}:
        raise EvaluationError(f"{role} {path}: signature {SERVING_SIGNATURE!r} takes {sorted(inputs)}, "
                              f"the contract is one input {SERVING_INPUT!r} (serialized tf.Examples)")


def check_probability_outputs(outputs: dict[str, Any], info: ModelInfo, where: str, rank: int) -> None:
    """`probabilities` [..., C] of `rank` and `class_ids` of one rank less among the declared outputs (name ->
    TensorSpec): a labels (rank 2) or masks (rank 4) task's `check_served_outputs`; `where`: role and path."""
    missing = [name for name in OUTPUTS if name not in outputs]
    if missing:
        raise EvaluationError(f"{where}: signature {SERVING_SIGNATURE!r} lacks outputs {missing} "
                              f"(returns {sorted(outputs)})")
    probabilities = outputs["probabilities"].shape
    if probabilities.rank != rank or probabilities[-1] not in (None, info.num_classes):
        raise EvaluationError(f"{where}: probabilities have shape {probabilities}, a {info.task} model with "
                              f"{info.num_classes} classes should give rank {rank} ending in {info.num_classes}")
    if outputs["class_ids"].shape.rank != rank - 1:
        raise EvaluationError(f"{where}: class_ids have shape {outputs['class_ids'].shape}, "
                              f"expected rank {rank - 1}")


def load_model(path: str, role: str, task_of: Callable[[str], Any]) -> LoadedModel:
    """The model in `path` with its info and serving signature, checked against the contract (`task_of`: the
    task registry's lookup, `tasks.task_for`)."""
    info = _read_info(path, role)
    task = task_of(info.task)
    enable_tensorflow_filesystems([path])  # an s3:// model: before TensorFlow opens it
    try:
        module = tf.saved_model.load(path)
    except (OSError, ValueError, tf.errors.OpError) as err:
        raise EvaluationError(f"{role} {path}: cannot load the SavedModel: {err}") from err
    signatures = getattr(module, "signatures", {})
    if SERVING_SIGNATURE not in signatures:
        raise EvaluationError(f"{role} {path}: the SavedModel has no {SERVING_SIGNATURE!r} signature "
                              f"(has {sorted(signatures)})")
    signature = signatures[SERVING_SIGNATURE]
    _check_inputs(path, role, signature)
    task.check_served_outputs(signature.structured_outputs, info, f"{role} {path}")
    return LoadedModel(path, info, module, signature, task.served_label_map(path, info, f"{role} {path}"))


def check_same_labels(candidate: LoadedModel, baseline: LoadedModel) -> None:
    """A baseline is only comparable when it turns the same raw labels into the same class ids."""
    ours, theirs = candidate.info, baseline.info
    # label_classes, not num_classes: a model exported before served classes left out OOV served it too.
    for name in ("task", "label", "label_classes", "label_vocabulary"):
        if getattr(ours, name) != getattr(theirs, name):
            raise EvaluationError(f"baseline {baseline.path} is not comparable with model {candidate.path}: "
                                  f"{name} {getattr(theirs, name)!r} vs {getattr(ours, name)!r}")
    if candidate.label_map != baseline.label_map:  # same names in the same order, other ids
        raise EvaluationError(f"baseline {baseline.path} is not comparable with model {candidate.path}: label map "
                              f"{_described(baseline.label_map)} vs {_described(candidate.label_map)}")


def check_data_label_map(model: LoadedModel, role: str, data_map: dict | None, examples: str) -> None:
    """A detector scores only eval data whose label map is its own (the same names with the same ids): the
    same class count in another order or with other ids would score every box as the wrong class."""
    if model.label_map is None:
        return
    try:
        ours = LabelMap(data_map or {})
    except (TypeError, ValueError) as err:
        raise EvaluationError(f"the examples {examples} record no usable label map ({err})") from None
    if ours != model.label_map:
        named = "model" if role == "candidate" else role  # as --model and --baseline name them
        raise EvaluationError(f"the examples {examples} have label map {ours.describe()}, but {named} {model.path} "
                              f"serves {model.label_map.describe()}: evaluate on examples made with its label map")


def _described(label_map: LabelMap | None) -> str:
    return "none" if label_map is None else label_map.describe()
