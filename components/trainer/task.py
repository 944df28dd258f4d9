"""What to train, read from the manifests: input image, target, task, classes, and where the raw data is.

Three inputs are possible:

- ExampleGen output (raw uint8 pixels): the Trainer scales images to [0, 1];
- Transform output (materialized): trained as is; its `transform_graph` goes into the served model;
- ExampleGen output plus `--transform TOUT`: the transform graph is applied in the input pipeline.

    task = resolve_task(config.input)
    task.kind, task.input_name, task.target, task.num_classes   # 'classification', 'x', 'y', 10

A detection target (`box_schema.BOX_TARGET`, the eight features of role "boxes") has the label map's classes,
in id order (the source's ids in the data and served, an id's rank in training: `box_schema.LabelMap`), and at
most `max_boxes` boxes an example.

A string label's model has one softmax unit more than it has classes (`num_outputs`): the OOV id
that Transform (or the vocabulary table, without Transform) gives a label unseen in the vocabulary.
The export serves the `num_classes` trained classes only (`export.served_probabilities`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..core import storage
from ..core.box_schema import BBOX, BOX_ROLE, BOX_TARGET, BOXES_KEY, CLASS_LABEL, DETECTION_TASK, IS_CROWD, LabelMap
from ..core.errors import ConfigError
from ..core.manifest import FeatureSpec, Manifest, read_manifest
from ..core.model_info import OOV_CLASS
from .config import InputOptions


@dataclass(frozen=True)
class TrainingTask:
    """Everything about the data the model and the export need."""

    kind: str  # "classification" | "segmentation" | "detection"
    input_name: str
    target: str
    num_classes: int  # the classes trained and served (a string label's vocabulary)
    num_outputs: int  # the model's softmax units: num_classes, plus the OOV id of a string label
    class_names: list[str]
    label_vocabulary: list[str] | None
    train_dir: str  # the directory whose shards are read in training
    raw_dir: str  # ExampleGen's output: what the served model parses
    raw_manifest: Manifest
    train_manifest: Manifest
    transform_graph: str | None  # a tft.TFTransformOutput directory, or None
    materialized: bool  # the train_dir shards are already transformed
    label_map: LabelMap | None = None  # detection: {class name: id}, the ids the examples store and the model serves
    max_boxes: int = 0  # detection: the most boxes an example has (the padded stream's K)

    @property
    def stream_features(self) -> tuple[str, ...]:
        """The features the input stream parses: the image and the target (a detection target's boxes and ids)."""
        if self.kind == DETECTION_TASK:  # crowds are ignore regions in training (box_stream.py)
            crowd = (IS_CROWD,) if IS_CROWD in self.train_manifest.features else ()
            return (self.input_name, *BBOX, CLASS_LABEL, *crowd)
        return (self.input_name, self.target)

    @property
    def output_names(self) -> list[str]:
        """A name per softmax unit: the classes, then `OOV_CLASS` for the units past them."""
        return self.class_names + [OOV_CLASS] * (self.num_outputs - self.num_classes)

    @property
    def input_spec(self) -> FeatureSpec:
        return self.train_manifest.features[self.input_name]

    @property
    def raw_input_spec(self) -> FeatureSpec:
        return self.raw_manifest.features[self.input_name]


def resolve_task(inputs: InputOptions) -> TrainingTask:
    """The task for the input options; ConfigError naming the option when the data does not fit it."""
    manifest = read_manifest(inputs.examples)
    if manifest.extra.get("component") == "transform":
        if inputs.transform is not None:
            raise ConfigError(f"examples {inputs.examples!r} are already transformed; drop --transform")
        graph = storage.join(inputs.examples, manifest.extra["transform_graph"])
        raw_dir = storage.parent(manifest.extra["inputs"][0]["path"])
        return _task(inputs, manifest, read_manifest(raw_dir), raw_dir, graph, materialized=True)
    if inputs.transform is not None:
        transformed = read_manifest(inputs.transform)
        graph = storage.join(inputs.transform, transformed.extra["transform_graph"])
        return _task(inputs, transformed, manifest, inputs.examples, graph, materialized=False)
    return _task(inputs, manifest, manifest, inputs.examples, None, materialized=False)


def _task(inputs: InputOptions, model_side: Manifest, raw: Manifest, raw_dir: str, graph: str | None,
          materialized: bool) -> TrainingTask:
    """`model_side`: the features the model sees (transformed when there is a graph)."""
    for split in (inputs.train_split, inputs.eval_split):
        if split is not None and split not in raw.splits:
            raise ConfigError(f"split {split!r} is not in {raw_dir} (has {sorted(raw.splits)})")
    images = [n for n, f in model_side.features.items() if f.role == "image"]
    if not images:
        raise ConfigError(f"{raw_dir}: no image feature to train on (features {sorted(model_side.features)})")
    input_name = images[0]
    target = choose_target(inputs.label, {name: f.role for name, f in model_side.features.items()})
    if input_name not in raw.features:
        raise ConfigError(f"the model input {input_name!r} is not a raw feature of {raw_dir}: "
                          "a custom preprocessing_fn must keep the image feature's name")
    if target == BOX_TARGET:
        return _detection_task(inputs, model_side, raw, raw_dir, graph, materialized, input_name)
    kind = task_kind(model_side.features[target].role)
    vocabulary = _vocabulary(model_side, target, graph) if graph else _raw_vocabulary(raw, target, inputs)
    num_outputs = inputs.num_classes or _num_classes(model_side, raw, target, vocabulary, kind, inputs)
    names = _class_names(target, vocabulary, num_outputs)
    return TrainingTask(kind, input_name, target, len(names), num_outputs, names, vocabulary, inputs.examples,
                        raw_dir, raw, model_side if materialized else raw, graph, materialized)


def choose_target(label: str | None, roles: Mapping[str, str]) -> str:
    """The feature to predict (`roles`: feature → role): `label` if given, else the first mask, else the boxes
    (`BOX_TARGET`, which names the features of role "boxes" together), else the only label.

    Also used before a pipeline runs, on the roles ExampleGen will detect in the index.
    """
    boxes = BOX_ROLE in roles.values()
    if label is not None:
        if label == BOX_TARGET and boxes:
            return BOX_TARGET
        if label not in roles or roles[label] == BOX_ROLE:
            known = sorted(n for n, role in roles.items() if role != BOX_ROLE) + ([BOX_TARGET] if boxes else [])
            raise ConfigError(f"label {label!r} is not a target of the examples (has {known})")
        return label
    masks = [name for name, role in roles.items() if role == "mask"]
    if masks:
        return masks[0]
    if boxes:
        return BOX_TARGET
    labels = [name for name, role in roles.items() if role == "label"]
    if len(labels) != 1:
        raise ConfigError(f"cannot choose the target: label features {labels}, no mask; pass --label")
    return labels[0]


def task_kind(target_role: str) -> str:
    """A mask target is segmentation, boxes are detection; any other target is classification."""
    return {"mask": "segmentation", BOX_ROLE: DETECTION_TASK}.get(target_role, "classification")


def _detection_task(inputs: InputOptions, model_side: Manifest, raw: Manifest, raw_dir: str, graph: str | None,
                    materialized: bool, input_name: str) -> TrainingTask:
    """The boxes' task: classes from the label map ExampleGen recorded, in id order; K from its figures."""
    missing = [name for name in (*BBOX, CLASS_LABEL) if name not in model_side.features]
    if missing:
        raise ConfigError(f"{inputs.examples}: boxes without the features {missing}: a custom preprocessing_fn must "
                          "pass the box features through unchanged")
    boxes = raw.extra.get(BOXES_KEY) or model_side.extra.get(BOXES_KEY) or {}
    if not boxes.get("label_map"):
        raise ConfigError(f"{raw_dir}: the manifest records no label map of its boxes ({BOXES_KEY}.label_map)")
    try:
        label_map = LabelMap(boxes["label_map"])
    except (TypeError, ValueError) as err:
        raise ConfigError(f"{raw_dir}: the manifest's label map {boxes['label_map']}: {err}") from None
    names = list(label_map.names)
    if inputs.num_classes is not None and inputs.num_classes != len(names):
        raise ConfigError(f"--num-classes {inputs.num_classes} differs from the label map's {len(names)} classes; "
                          "drop --num-classes for boxes")
    return TrainingTask(DETECTION_TASK, input_name, BOX_TARGET, len(names), len(names), names, None,
                        inputs.examples, raw_dir, raw, model_side if materialized else raw, graph, materialized,
                        label_map, _box_slots(boxes, raw, raw_dir))


def _box_slots(boxes: dict, raw: Manifest, raw_dir: str) -> int:
    """K, the boxes an example's padded rows hold: the most any image of any split has (ExampleGen's figures of
    every split), else the limit ExampleGen enforced (`max_boxes`, 100 by default: 20x what the demo set needs)."""
    figures = boxes.get("figures") or {}
    counts = [int(count) for split in raw.splits for count in (figures.get(split) or {}).get("boxes_per_image", {})]
    if counts and all(split in figures for split in raw.splits):
        return max(max(counts), 1)
    limit = int(boxes.get("max_boxes") or 0)
    if limit < 1:
        raise ConfigError(f"{raw_dir}: the manifest records no max_boxes of its boxes ({BOXES_KEY}.max_boxes)")
    return limit


def _vocabulary(manifest: Manifest, target: str, graph: str) -> list[str] | None:
    info = manifest.extra.get("vocabularies", {}).get(target)
    if info is None:
        return None
    path = storage.join(storage.parent(graph), *info["file"].split("/"))
    return [line.rstrip("\n") for line in storage.read_text(path).splitlines()][: info["size"]]


def _raw_vocabulary(raw: Manifest, target: str, inputs: InputOptions) -> list[str] | None:
    """Without Transform, a string label's classes are train's values in sorted order (+ one OOV)."""
    if raw.features[target].dtype != "string":
        return None
    counts = raw.splits[inputs.train_split].label_counts.get(target)
    if not counts:
        raise ConfigError(f"label {target!r}: the manifest has no value counts to build its classes from")
    return sorted(counts)


def _num_classes(model_side: Manifest, raw: Manifest, target: str, vocabulary: list[str] | None, kind: str,
                 inputs: InputOptions) -> int:
    if vocabulary is not None:
        return len(vocabulary) + 1
    if kind == "segmentation":
        classes = model_side.extra.get("mask_classes", {}).get(target)
        if classes is None:
            raise ConfigError(f"mask {target!r}: the number of classes is unknown without Transform; "
                              "pass --num-classes or train on Transform's output")
        return max(int(classes), 2)
    ids = [int(v) for split in raw.splits.values() for v in split.label_counts.get(target, {})]
    if not ids:
        raise ConfigError(f"label {target!r}: no value counts in the manifest; pass --num-classes")
    if min(ids) < 0:
        raise ConfigError(f"label {target!r} has negative class ids ({min(ids)}); class ids must be 0..K-1")
    return max(max(ids) + 1, 2)


def _class_names(target: str, vocabulary: list[str] | None, num_outputs: int) -> list[str]:
    """The classes served: ids "0".."K-1", or a string label's vocabulary (its OOV id is no class)."""
    if vocabulary is None:
        return [str(i) for i in range(num_outputs)]
    if len(vocabulary) < 2:
        raise ConfigError(f"label {target!r} has {len(vocabulary)} value(s) in its vocabulary {vocabulary}: "
                          "a classifier needs at least two classes")
    if num_outputs <= len(vocabulary):
        raise ConfigError(f"label {target!r}: --num-classes {num_outputs} leaves no room for the vocabulary's "
                          f"{len(vocabulary)} classes and the OOV id; give {len(vocabulary) + 1} or more, or none")
    return list(vocabulary)

