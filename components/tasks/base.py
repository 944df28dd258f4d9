"""The one interface a task kind offers the components: the Evaluator's and infra validation's parts (issue 68).

A `Task` is what is particular to one kind of annotation (class labels, masks, boxes), as TF Model Garden's
`base_task.Task` is to its trainer and Ultralytics' `models/yolo/<task>/val.py` to its shared validator: the
Evaluator keeps the mechanics (loading the models, sizing the batch, the canaries, the gate, publishing the
outputs, the markers) and asks the task, found by the model's kind in the registry (`tasks.task_for`), for:

- `metric_names`, `lower_is_better`, `unbounded_metrics`, `default_threshold`: what its gate may name;
- `check_examples(manifest, info, examples)`: that the examples carry the model's label in this kind's form
  (an `EvaluationError` naming what is wrong), before any example is read;
- `canary_outputs(outputs)`: what of one served batch infra validation replays (canary_predictions.npy);
- `evaluate(run)`: the split scored through the models, as metrics.json's task sections, the plots and
  other files by output name, and the line the run prints;
- `gate_values(overall)`: the overall metrics as the gate reads them (a float each, NaN where undefined);
- `scoring_feature(manifest, info, examples)`: the feature the scoring stream parses beside the slices, and
  whether it is decoded for the model step (here the label, decoded; a detector's image, as stored);
- `check_served_outputs(outputs, info, where)`, `served_label_map(path, info, where)`: when a model is loaded
  (evaluator/loaded_model.py, for the Evaluator and predict), its signature's declared outputs held to the
  kind's contract, and what it serves beside them (a detector's label map; here none).

Infra validation keeps its mechanics too (the TensorFlow-only probe and its process, the canaries fed to each
signature, warm-up, latency, memory, the report and markers) and asks the model's task for:

- `served_outputs`: the outputs of each signature the probe saves per canary (`<signature>.npz`);
- `needs_canary_predictions`: whether they are judged against the Evaluator's canary_predictions.npy (then
  infra validation refuses an evaluation without it);
- `signature_problems(signatures)`: why the signatures fed are not enough for this kind (one line each);
- `judge_served(check)`: the saved answers judged (`ServedCheck` in, `ServedJudgement` out).

A confusion kind (labels, masks) also gives the Evaluator's shared confusion code (evaluator/confusion.py's
`ConfusionTask`) its labels' class ids and a batch's counts (`label_ids`, `batch_counts`), a group's report
(`group_report`), its plot title's scores (`score_text`) and its part of the bootstrap (`bootstrap_arrays`,
`bootstrap_metrics`: evaluator/intervals.py resamples, the kind computes its metrics per resample) and its
likely label errors (`find_label_issues`, `issue_overlay`: evaluator/label_list.py ranks, names and draws them).

Predict keeps its mechanics (the sources, the plan, batching, the table and log files, the atomic output, the
row reconciliation) and asks the model's task for (as Ultralytics' `yolo/<task>/predict.py` its predictor):

- `check_prediction_config(config)`: a ConfigError for an option the kind cannot write, before the output is touched;
- `prediction_spec(config, info, model_dir, staged)`: what its writer reads in the workers (`PredictionSpec`:
  a part's table suffix, its own items' staged places, its options);
- `served_predictions(outputs)`: one served call's outputs split per example;
- `prediction_part(spec, stem)`: the writer of one bundle's part (`PredictionPart`: `write(PredictedRow)`,
  `close()` its counts);
- `prediction_items`, `finish_predictions(spec, stems, counts)`: its own outputs beside the tables (a mask
  folder, a box CSV), written from the parts once they are all there; its entries of predict.json.

>>> class Toy(Task):
...     kind, metric_names, default_threshold = "toy", ("mae",), "mae<=1"
...     def check_examples(self, manifest, info, examples): pass
...     def canary_outputs(self, outputs): return outputs["value"]
...     def evaluate(self, run): raise NotImplementedError
...     def judge_served(self, check): raise NotImplementedError
...     def check_served_outputs(self, outputs, info, where): pass
...     def served_predictions(self, outputs): return [{"value": v} for v in outputs["value"]]
...     def prediction_part(self, spec, stem): raise NotImplementedError
>>> Toy().signature_problems(["serving_default"]), Toy().gate_values({"mae": 0.5}), Toy().lower_is_better
([], {'mae': 0.5}, frozenset())
>>> Toy().served_predictions({"value": [1.5, 2.0]}), Toy().prediction_items, Toy().finish_predictions(None, [], [])
([{'value': 1.5}, {'value': 2.0}], (), {'masks': None})
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, ClassVar, NamedTuple


@dataclass(frozen=True)
class EvaluationRun:
    """What the Evaluator hands a task: its options, the scoring plan, the models by role ("candidate", and
    "baseline" when there is one; the candidate's signature keeps the canaries), the batch size and `echo`.
    Typed loosely: a task reads these as the Evaluator defines them (evaluator/config.py, scorer.py)."""

    config: Any  # EvaluatorConfig
    plan: Any  # scorer.ScoringPlan
    models: dict[str, Any]  # role -> loaded_model.LoadedModel
    batch_size: int
    echo: Callable[[str], None]


@dataclass(frozen=True)
class TaskEvaluation:
    """A task's answer: metrics.json's sections after its header (`class_names` here replaces the header's in
    place), `baseline` and `intervals` among them; the files by output name; the counts the timing reports."""

    sections: dict[str, Any]
    files: dict[str, bytes]
    examples: int  # examples scored
    seconds: float  # scoring time
    timing: dict[str, float | None] = field(default_factory=dict)  # the task's own parts of metrics.json's timing
    summary: str = ""  # what the run prints before the verdict ("120 examples in 0.4 s (300/s)")
    notes: tuple[str, ...] = ()  # lines printed before the summary


@dataclass(frozen=True)
class ServedCheck:
    """What infra validation hands a task once its probe answered: its options, the model's contract, the
    canaries, the signatures fed, where the probe saved each one's `served_outputs` (`<outputs>/<name>.npz`),
    what each one's first call returned (`checked[name]["returned"]`), the probe's local copy of the model and
    the evaluated examples. Typed loosely, as `EvaluationRun` (infra_validator/config.py, canaries.py)."""

    config: Any  # InfraValidatorConfig
    info: Any  # core.model_info.ModelInfo
    canaries: Any  # infra_validator.canaries.Canaries
    signatures: list[str]
    outputs: str
    checked: dict[str, Any]
    model: str
    examples: str


@dataclass(frozen=True)
class ServedJudgement:
    """A task's judgement of the served answers: a difference per signature for the report (max_abs_diff), the
    reasons against (one line each; none: blessed) and what passed (the report's lines when blessed)."""

    deltas: dict[str, float]
    reasons: list[str]
    passed: list[str]


@dataclass(frozen=True)
class PredictionSpec:
    """What a kind's prediction writer reads in predict's workers (small, picklable), made by its
    `prediction_spec` in predict's driver: predict publishes each part's `<stem><suffix>` as
    `predictions/part-NNNNN<suffix>`."""

    suffix: str  # a part's table file: ".csv", ".parquet" (the format asked), a detector's ".jsonl"
    class_names: tuple[str, ...]
    top_k: int  # the classes a row lists at most (the model's count at most)
    format: str  # the table format: "csv" or "parquet", as asked
    items: dict[str, str] = field(default_factory=dict)  # each of the kind's `prediction_items` -> its staged place
    options: Any = None  # the kind's own (a detector's score floor, label map, image sizes)


class PredictedRow(NamedTuple):
    """One input row's served answer, as predict's writer hands it to a kind's part."""

    index: str  # the index file or shard the row came from
    source: int  # that source's number in predict's plan
    row: int  # 1-based data row (or record) number in it
    path: str  # the row's image file ("" when the examples record none)
    size: tuple[int, int] | None  # (height, width) of a new file's image as the file is; None for a stored example
    outputs: dict[str, Any]  # the example's share of the served outputs (`Task.served_predictions`)


class PredictionPart(ABC):
    """One bundle's predictions of a kind, its files appearing whole on `close()`."""

    @abstractmethod
    def write(self, row: PredictedRow) -> dict[str, Any]:
        """Writes one row; returns its outputs as the prediction log keeps them."""

    @abstractmethod
    def close(self) -> dict[str, int]:
        """Closes the part; its counts: `rows`, and the kind's own (a detector's `boxes`)."""


class Task(ABC):
    """One kind of annotation, as the components see it. Subclasses set the class attributes."""

    kind: ClassVar[str]  # the model contract's `task` (core/model_info.py), the registry's key
    metric_names: ClassVar[tuple[str, ...]]  # the overall metrics a threshold or a regression may name
    lower_is_better: ClassVar[frozenset[str]] = frozenset()
    unbounded_metrics: ClassVar[frozenset[str]] = frozenset()  # others lie in [0, 1]
    default_threshold: ClassVar[str]  # the blessing threshold of a run that names none
    served_outputs: ClassVar[tuple[str, ...]]  # what infra validation's probe saves of each signature's answers
    needs_canary_predictions: ClassVar[bool]  # judged against the Evaluator's answers for the canaries

    @abstractmethod
    def check_examples(self, manifest: Any, info: Any, examples: str) -> None:
        """Raises `EvaluationError` unless `manifest` (core.manifest.Manifest of `examples`) has the label of a
        model of this kind (`info`: core.model_info.ModelInfo) in the form scoring reads."""

    @abstractmethod
    def canary_outputs(self, outputs: dict[str, Any]) -> Any:
        """The tensor [N, ...] kept per example of a served batch for infra validation's replay."""

    @abstractmethod
    def evaluate(self, run: EvaluationRun) -> TaskEvaluation:
        """Every example of the split through every model once; the metrics, files and lines to publish."""

    @abstractmethod
    def judge_served(self, check: ServedCheck) -> ServedJudgement:
        """Infra validation's verdict on the probe's saved answers for the canaries."""

    def signature_problems(self, signatures: list[str]) -> list[str]:
        """Why the signatures infra validation can feed fall short for this kind: here none."""
        return []

    prediction_items: ClassVar[tuple[str, ...]] = ()  # its outputs of predict beside the tables (e.g. "masks")

    @abstractmethod
    def served_predictions(self, outputs: dict[str, Any]) -> list[dict[str, Any]]:
        """One served call's outputs (name -> tensor [N, ...]) as N per-example dicts of numpy arrays."""

    @abstractmethod
    def prediction_part(self, spec: PredictionSpec, stem: str) -> PredictionPart:
        """The writer of one bundle's part, its files named `stem` and a suffix (the table's: `spec.suffix`)."""

    def check_prediction_config(self, config: Any) -> None:
        """A ConfigError for an option of predict's (predict/config.py) this kind cannot write: here none."""

    def prediction_spec(self, config: Any, info: Any, model_dir: str, staged: Callable[[str], str]) -> PredictionSpec:
        """In predict's driver, once the inputs are planned: a table in the format asked, the items staged where
        `staged(name)` says, no options of its own."""
        return PredictionSpec("." + config.format, tuple(info.class_names), min(config.top_k, info.num_classes),
                              config.format, {item: staged(item) for item in self.prediction_items})

    def finish_predictions(self, spec: PredictionSpec, stems: list[str],
                           counts: list[dict[str, int]]) -> dict[str, Any]:
        """Once predict published the parts (`stems`: each part's staged path without suffix, in row order, and
        its counts): the kind's items written from them; its entries of predict.json. Here no item, and
        `masks` None (predict.json has it for every kind)."""
        return {"masks": None}

    def scoring_feature(self, manifest: Any, info: Any, examples: str) -> tuple[str, bool]:
        """(the feature the Evaluator's stream parses beside the slice columns, whether it is decoded for the
        model step): here the model's label, decoded (a value, a mask)."""
        return info.label, True

    @abstractmethod
    def check_served_outputs(self, outputs: dict[str, Any], info: Any, where: str) -> None:
        """An `EvaluationError` (naming `where`: the model's role and path) unless the serving signature's
        declared outputs (name -> TensorSpec) keep this kind's contract."""

    def served_label_map(self, path: str, info: Any, where: str) -> Any:
        """What the model in `path` serves its classes as, beside its outputs: here nothing (None)."""
        return None

    def gate_values(self, overall: dict[str, Any]) -> dict[str, float]:
        """The overall metrics as `blessing.bless` takes them: here as they are."""
        return overall
