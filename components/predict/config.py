"""Predict's options: one frozen dataclass that checks its values and names the bad one.

>>> cfg = PredictConfig(model="serving", output="preds", index="new.csv", data_root="photos")
>>> cfg.source, cfg.format, cfg.top_k
('index', 'csv', 3)
>>> PredictConfig(model="m", output="o", examples="ex", index="new.csv")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: give either index (with data_root) or examples, not both
"""
from __future__ import annotations

from dataclasses import dataclass

from ..core import storage
from ..core.batch_memory import SCORING_BUDGET_MB
from ..core.errors import ConfigError
from ..core.folds import FoldSelection
from ..core.config_values import require_locations, require_positive
from ..core.input_checks import check_examples
from ..core.model_info import MODEL_INFO_NAME
from ..pusher.executor import SERVING_POINTER, read_pointer

MARKER = "predict.json"  # the completion marker: rows, predicted, rejected, the model
FORMATS = ("csv", "parquet")
DEFAULT_BATCH = 64  # examples a batch holds at most when --batch-size is not given (fewer when memory_mb needs)
# A detector's boxes scoring less are not written. A detector answers up to 100 boxes an image, most of them
# near zero; the rows are for a person correcting them in a labelling tool. A CenterNet score is a heat-map peak,
# not a calibrated probability (a true object's peak is below 1 unless its centre is found to the cell), so
# even odds drop many true boxes: on the demo shapes (a model of AP50 0.82, 20 photos, 50 true boxes) a floor of
# 0.5 wrote 31 boxes and found 30, 0.3 wrote 55 and found 36, 0.2 wrote 82 and found 42. 0.3 is CenterNet's
# own display threshold. 0 writes every box (e.g. to score them elsewhere).
DEFAULT_MIN_SCORE = 0.3


@dataclass(frozen=True, kw_only=True)
class PredictConfig:
    """`model`: a served model directory, a serving directory (its CURRENT.json names the model) or
    that CURRENT.json. Input: `index` CSV files under `data_root`, or `examples` (ExampleGen output)
    and its `split`. A batch holds at most `batch_size` examples and about `max_batch_mb` of them;
    a model call holds as many of those as fit `memory_mb` of activations (`core.batch_memory`,
    measured on the first examples each worker scores). An explicit `batch_size` that cannot fit
    `memory_mb` is refused."""

    model: str
    output: str
    index: str | None = None
    data_root: str | None = None
    examples: str | None = None
    split: str = "eval"
    format: str = "csv"
    top_k: int = 3
    prediction_log: bool = False
    batch_size: int | None = None  # None: DEFAULT_BATCH at most, sized by memory_mb
    max_batch_mb: float = 64.0
    memory_mb: float = SCORING_BUDGET_MB
    rows_per_chunk: int | None = None  # None: chosen from the row count, as ExampleGen does
    min_score: float = DEFAULT_MIN_SCORE  # a detector's: boxes scoring less are not written
    beam_args: tuple[str, ...] = ()
    # With examples: only these folds of the split (core/folds.py); `shardflow find-label-issues` sets it, no flag.
    folds: FoldSelection | None = None

    def __post_init__(self) -> None:
        require_locations(self, "model", "output")
        if (self.index is None) == (self.examples is None):
            raise ConfigError("give either index (with data_root) or examples, not both" if self.index
                              else "give an input: index (with data_root) or examples")
        if self.index is not None and not self.data_root:
            raise ConfigError(f"index {self.index!r} needs data_root, the directory its paths are relative to")
        if self.format not in FORMATS:
            raise ConfigError(f"format must be one of {FORMATS}, got {self.format!r}")
        for name in ("top_k", "batch_size"):
            value = getattr(self, name)
            if (value is not None or name == "top_k") and (isinstance(value, bool) or not isinstance(value, int)
                                                            or value < 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")
        if not self.max_batch_mb > 0:
            raise ConfigError(f"max_batch_mb must be > 0, got {self.max_batch_mb!r}")
        require_positive("memory_mb", self.memory_mb, "megabytes")
        if self.folds is not None and (self.examples is None or not isinstance(self.folds, FoldSelection)):
            raise ConfigError(f"folds selects examples of a split: give examples and a FoldSelection, "
                              f"got {self.folds!r}")
        if isinstance(self.min_score, bool) or not isinstance(self.min_score, (int, float)) or not (
                0.0 <= self.min_score <= 1.0):
            raise ConfigError(f"min_score must be a number from 0 to 1 (a box's score), got {self.min_score!r}")
        if self.rows_per_chunk is not None and self.rows_per_chunk < 1:
            raise ConfigError(f"rows_per_chunk must be >= 1, got {self.rows_per_chunk!r}")

    @property
    def batch_limit(self) -> int:
        """The most examples one batch holds."""
        return DEFAULT_BATCH if self.batch_size is None else self.batch_size

    @property
    def source(self) -> str:
        return "index" if self.index is not None else "examples"

    def check_inputs(self) -> str:
        """The checks that touch storage, before any heavy import; returns the model directory to load."""
        if self.index is not None:
            if not storage.is_file(self.index):
                raise ConfigError(f"index {self.index!r} is not a CSV file")
            if not storage.is_dir(str(self.data_root)):
                raise ConfigError(f"data_root {self.data_root!r} is not a directory")
        else:
            check_examples(str(self.examples))
        return resolve_model(self.model)


def resolve_model(reference: str) -> str:
    """The model directory `reference` means: itself, or the version its CURRENT.json (or it) names."""
    if storage.is_file(storage.join(reference, MODEL_INFO_NAME)):
        return reference
    serving_dir = reference.rstrip("/")
    if serving_dir.endswith("/" + SERVING_POINTER) or serving_dir == SERVING_POINTER:
        serving_dir = serving_dir[:-len(SERVING_POINTER)].rstrip("/") or "."
    pointer = read_pointer(serving_dir) if storage.is_dir(serving_dir) else None
    if pointer is not None:
        model = str(pointer.get("model", ""))
        if not storage.is_file(storage.join(model, MODEL_INFO_NAME)):
            raise ConfigError(f"model {reference!r}: its {SERVING_POINTER} names {model!r}, which has no {MODEL_INFO_NAME}")
        return model
    what = "does not exist" if not storage.exists(reference) else f"has neither {MODEL_INFO_NAME} nor {SERVING_POINTER}"
    raise ConfigError(f"model {reference!r} {what}: give a model exported by shardflow train, "
                      f"or a serving directory shardflow push wrote")
