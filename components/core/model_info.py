"""The contract between the Trainer's exported model and whoever scores or serves it.

`MOUT/model/` is a TensorFlow SavedModel. Its `serving_default` signature takes one input,
`examples`: a tf.string vector of serialized tf.train.Examples in ExampleGen's raw format (the
transform graph, when there is one, is inside the model), and returns

- `probabilities`: float32 [N, C] (classification) or [N, H, W, C] (segmentation), C = `num_classes`;
- `class_ids`: int64 [N] or [N, H, W], the arg-max of `probabilities`;
- for classification with string labels also, as TF Serving's classification outputs (which TFMA
  reads): `classes` tf.string [N, C], the class names (`class_names`, the same in every row),
  `scores` float32 [N, C] (= `probabilities`), and `predicted_class` tf.string [N], the name of
  the arg-max class.

Next to `saved_model.pb` lies `shardflow_model.json` (a `ModelInfo`): what the model predicts
and how a raw label becomes a class id, so an evaluator needs nothing but the model directory
and the examples:

- integer labels and masks are class ids already;
- string labels are looked up in `label_vocabulary`; the served classes are the vocabulary
  (`class_names == label_vocabulary`, `num_classes == len(label_vocabulary)`). A string not in it
  gets the OOV id `len(label_vocabulary)` (Transform's one OOV bucket): a label unseen in training,
  which no served output names. `label_classes` is the served classes plus `OOV_CLASS`, the ids an
  evaluator counts labels in.

>>> info = ModelInfo(task="classification", label="y", num_classes=2, class_names=["a", "b"],
...                  label_vocabulary=["a", "b"])
>>> info.class_id_of("b"), info.class_id_of("zebra"), info.label_classes
(1, 2, ['a', 'b', '<OOV>'])

A model exported before the served classes left out the OOV id served it as its last class
(`num_classes == len(label_vocabulary) + 1`); such a model is still read, with the same
`label_classes`, so an earlier run's served model stays a comparable baseline.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Any

from . import storage

MODEL_INFO_NAME = "shardflow_model.json"
SERVING_SIGNATURE = "serving_default"
SERVING_INPUT = "examples"
# The second signature: encoded image files of any size (what a TF Serving REST client sends as {"b64": ...}).
IMAGE_SIGNATURE = "serving_image"
IMAGE_INPUT = "images"
TASKS = ("classification", "segmentation", "detection")
# The name of the label id past a string label's vocabulary: labels unseen in training, never a served class.
OOV_CLASS = "<OOV>"


@dataclass(frozen=True)
class ModelInfo:
    """What an exported model predicts. `extra` holds provenance (training data, options, steps)."""

    task: str
    label: str
    num_classes: int
    class_names: list[str]
    label_vocabulary: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.task not in TASKS:
            raise ValueError(f"model task must be one of {TASKS}, got {self.task!r}")
        fewest = 1 if self.task == "detection" else 2  # a detector of one class still tells it from background
        if not isinstance(self.num_classes, int) or self.num_classes < fewest:
            raise ValueError(f"num_classes must be an integer >= {fewest}, got {self.num_classes!r}")
        if len(self.class_names) != self.num_classes:
            raise ValueError(f"class_names has {len(self.class_names)} names for {self.num_classes} classes")
        size = None if self.label_vocabulary is None else len(self.label_vocabulary)
        if size is not None and self.num_classes not in (size, size + 1):  # + 1: an export that served OOV
            raise ValueError(f"a label vocabulary of {size} strings serves {size} classes, got {self.num_classes}")

    @property
    def label_classes(self) -> list[str]:
        """The classes a raw label can become: `class_names`, then `OOV_CLASS` for a string label."""
        if self.label_vocabulary is None or self.num_classes > len(self.label_vocabulary):
            return list(self.class_names)  # class ids already, or an older export that served OOV itself
        return [*self.class_names, OOV_CLASS]

    def class_id_of(self, raw_label: str | bytes | int) -> int:
        """The class id of one raw label value (string labels through the vocabulary)."""
        if self.label_vocabulary is None:
            return int(raw_label)
        text = raw_label.decode() if isinstance(raw_label, bytes) else str(raw_label)
        try:
            return self.label_vocabulary.index(text)
        except ValueError:
            return len(self.label_vocabulary)

    def to_json(self) -> dict[str, Any]:
        obj = asdict(self)
        extra = obj.pop("extra")
        return {**extra, **obj}

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> "ModelInfo":
        keys = ("task", "label", "num_classes", "class_names", "label_vocabulary")
        extra = {k: v for k, v in obj.items() if k not in keys}
        return cls(obj["task"], obj["label"], obj["num_classes"], list(obj["class_names"]),
                   obj.get("label_vocabulary"), extra)


def write_model_info(model_dir: str | os.PathLike, info: ModelInfo) -> None:
    storage.write_json(storage.join(model_dir, MODEL_INFO_NAME), info.to_json())


def read_model_info(model_dir: str | os.PathLike) -> ModelInfo:
    """The model's `ModelInfo`; FileNotFoundError naming the directory when it is not a shardflow model.

    `model_dir` is a local path or a URI (s3://, gs://).
    """
    try:
        text = storage.read_text(storage.join(model_dir, MODEL_INFO_NAME))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        raise FileNotFoundError(f"{os.fspath(model_dir)} has no {MODEL_INFO_NAME}: "
                                "not a model exported by shardflow train") from None
    return ModelInfo.from_json(json.loads(text))


# What identifies a model's content: TensorFlow's SavedModel fingerprint (hashes of the graph, the signatures and
# the checkpoint: weights retrained in place change it) and shardflow's model contract.
FINGERPRINT = "fingerprint.pb"
MODEL_IDENTITY = (FINGERPRINT, MODEL_INFO_NAME)
_NOT_THE_MODEL = ("assets.extra/",)  # TF Serving's warm-up requests, copied beside a served version


def files_digest(location: str | os.PathLike, files: tuple[str, ...]) -> str:
    """The SHA-256 over `files` below `location`, each by name and bytes ('-' for one that is absent)."""
    digest = hashlib.sha256()
    for file in files:
        path = storage.join(location, *file.split("/"))
        digest.update(file.encode() + b"\0" + (storage.read_bytes(path) if storage.is_file(path) else b"-"))
    return digest.hexdigest()


def model_digest(model_dir: str | os.PathLike) -> str:
    """The identity of a model directory's content, whatever its path: the same bytes, the same digest.

    Its MODEL_IDENTITY files; a SavedModel without TensorFlow's fingerprint is identified by every file
    (hashing the weights too), so a model rewritten in place never keeps the digest of its former self.
    A served version's warm-up requests (`assets.extra/`) are not the model.

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> storage.write_bytes(storage.join(root, "a", FINGERPRINT), b"f1"); storage.write_bytes(storage.join(root, "b", FINGERPRINT), b"f1")
    >>> model_digest(storage.join(root, "a")) == model_digest(storage.join(root, "b"))
    True
    >>> storage.write_bytes(storage.join(root, "b", FINGERPRINT), b"f2")
    >>> model_digest(storage.join(root, "a")) == model_digest(storage.join(root, "b"))
    False
    """
    location = os.fspath(model_dir)
    if storage.is_file(storage.join(location, FINGERPRINT)):
        return files_digest(location, MODEL_IDENTITY)
    names = [name for name in storage.list_relative(location) if not name.startswith(_NOT_THE_MODEL)]
    return files_digest(location, tuple(names))
