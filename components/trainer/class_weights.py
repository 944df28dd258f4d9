"""Per-class loss weights (`--class-weight`): "balanced" from the train split's label counts, or explicit.

"balanced" is scikit-learn's rule, weight_c = n / (k · n_c) over the k classes present in train, from
the label counts ExampleGen's manifest already holds (no pass over the data); a class absent from
train (e.g. the OOV class) keeps weight 1. Explicit weights name classes by id or by name; unnamed
classes keep weight 1. The weights reach the loss as per-example (per-pixel for masks) sample weights
of the train stream, so the same mechanism serves labels and masks.

>>> class_weight_vector({"0": 1.0, "2": 3.0}, ["0", "1", "2"], {})
[1.0, 1.0, 3.0]
>>> class_weight_vector("balanced", ["cat", "dog", "<OOV>"], {"cat": 30, "dog": 10})
[0.6666666666666666, 2.0, 1.0]
"""
from __future__ import annotations

from ..core.errors import ConfigError
from .class_weight_option import parse_class_weight
from .task import TrainingTask


def class_weight_vector(spec: str | dict[str, float], class_names: list[str], counts: dict[str, int]) -> list[float]:
    """One weight per class id; `counts`: train's examples per label value (its name, or its id as text)."""
    if spec == "balanced":
        present = {name: int(counts[name]) for name in class_names if int(counts.get(name, 0)) > 0}
        if not present:
            raise ConfigError("class_weight 'balanced': the train split has no label counts to balance")
        total = sum(present.values())
        return [total / (len(present) * present[name]) if name in present else 1.0 for name in class_names]
    weights = [1.0] * len(class_names)
    for name, weight in spec.items():
        if name not in class_names:
            raise ConfigError(f"class_weight: {name!r} is not a class (classes: {', '.join(class_names[:20])})")
        weights[class_names.index(name)] = weight
    return weights


def task_class_weights(text: str | None, task: TrainingTask, train_split: str) -> list[float] | None:
    """The weights of `--class-weight` for this task, or None without the flag."""
    if text is None:
        return None
    spec = parse_class_weight(text)
    if spec == "balanced" and task.kind == "segmentation":
        raise ConfigError("class_weight 'balanced' needs label counts, which masks do not have in the manifest; "
                          "give explicit weights, e.g. --class-weight 0=1,1=5")
    counts = task.raw_manifest.splits[train_split].label_counts.get(task.target, {}) if spec == "balanced" else {}
    # One weight per softmax unit: a train label unseen in the vocabulary has the OOV id.
    return class_weight_vector(spec, task.output_names, {str(k): v for k, v in counts.items()})
