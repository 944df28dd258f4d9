"""`InfraValidatorConfig`: which model to probe against which evaluation, checked when it is built.

>>> InfraValidatorConfig(model="m", evaluation="e", output="o").batch_sizes
(1, 8, 32)
>>> parse_batch_sizes("1, 8,32")
(1, 8, 32)
>>> InfraValidatorConfig(model="m", evaluation="e", output="o", tolerance=-1)
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: tolerance must be a finite number >= 0, got -1
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..core import storage
from ..core.batch_memory import DEFAULT_BUDGET_MB
from ..core.errors import ConfigError
from ..core.config_values import require_apart, require_locations, require_positive
from ..core.input_checks import check_model
from ..core.model_info import read_model_info
from ..evaluator.outputs import BLESSED, CANARIES, CANARY_PREDICTIONS, NOT_BLESSED
from ..tasks import task_for

# The verdict markers (exactly one is written, last) and the report; the Pusher reads them.
INFRA_BLESSED, INFRA_NOT_BLESSED = "INFRA_BLESSED", "INFRA_NOT_BLESSED"
REPORT = "infra_validation.json"
# TF Serving replays this file of PredictionLog records when it loads a version (its fixed place).
WARMUP_DIR = "assets.extra"
WARMUP_FILE = f"{WARMUP_DIR}/tf_serving_warmup_requests"
MAX_WARMUP_REQUESTS = 1000  # TF Serving refuses a warm-up file of more records


# The latency table's cost: 30 calls a batch size took 4.6 s of the 7.7-s check of a 96-px detector (2 signatures
# x 3 sizes), and a cap of 3 s a size up to 18 s on photos, the step's largest fixed cost. 10 calls, or 0.5 s a
# size with at least 3, give the same p50 to a few percent (1.6 s there); p99 of 30 calls was their maximum anyway.
DEFAULT_LATENCY_CALLS, DEFAULT_LATENCY_SECONDS = 10, 0.5


def parse_batch_sizes(text: str) -> tuple[int, ...]:
    """`--batch-sizes 1,8,32`."""
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ConfigError(f"batch sizes must be integers separated by commas such as 1,8,32, got {text!r}") from None


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


@dataclass(frozen=True, kw_only=True)
class InfraValidatorConfig:
    """`model`: an exported model; `evaluation`: the Evaluator's output for it (its canaries and
    probabilities); `output`: where INFRA_BLESSED / INFRA_NOT_BLESSED, infra_validation.json and
    the warm-up file go. Each a local path or an s3:// / gs:// URI.

    `tolerance`: the largest |probability − the Evaluator's| allowed; `batch_sizes`: those timed
    (`latency_calls` calls each, fewer, but at least 3, once `latency_seconds` were spent on that batch
    size: 224-px photos through a large model take long); `memory_mb`: the activations budget of one
    call: a batch size over it fails validation before it is run (`core.batch_memory` measures an
    example); `warmup_requests`: PredictionLog records in the warm-up file;
    `timeout`: seconds the probe process may take.
    """

    model: str
    evaluation: str
    output: str
    batch_sizes: tuple[int, ...] = (1, 8, 32)
    tolerance: float = 1e-4
    warmup_requests: int = 256
    timeout: float = 600.0
    latency_calls: int = DEFAULT_LATENCY_CALLS
    latency_seconds: float = DEFAULT_LATENCY_SECONDS
    memory_mb: float = DEFAULT_BUDGET_MB

    def __post_init__(self) -> None:
        require_locations(self, "model", "evaluation", "output")
        object.__setattr__(self, "batch_sizes", tuple(self.batch_sizes))
        if not self.batch_sizes or not all(_positive_int(size) for size in self.batch_sizes):
            raise ConfigError(f"batch_sizes must be integers >= 1, got {self.batch_sizes!r}")
        self._check_numbers()
        require_apart(self.output, model=self.model, evaluation=self.evaluation)

    def _check_numbers(self) -> None:
        tolerance = self.tolerance
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) or not (
                math.isfinite(tolerance) and tolerance >= 0):
            raise ConfigError(f"tolerance must be a finite number >= 0, got {tolerance!r}")
        if not _positive_int(self.warmup_requests) or self.warmup_requests > MAX_WARMUP_REQUESTS:
            raise ConfigError(f"warmup_requests must be an integer from 1 to {MAX_WARMUP_REQUESTS} "
                              f"(TF Serving's limit), got {self.warmup_requests!r}")
        for name, unit in (("timeout", "seconds"), ("latency_seconds", "seconds"), ("memory_mb", "megabytes")):
            require_positive(name, getattr(self, name), unit)
        if not _positive_int(self.latency_calls):
            raise ConfigError(f"latency_calls must be an integer >= 1, got {self.latency_calls!r}")

    def check_inputs(self) -> None:
        """The checks that read storage: an exported model, an evaluation that finished with canaries."""
        check_model(self.model)
        if not any(storage.is_file(storage.join(self.evaluation, m)) for m in (BLESSED, NOT_BLESSED)):
            raise ConfigError(f"evaluation {self.evaluation!r} has no verdict (neither BLESSED nor NOT_BLESSED): "
                              "not a finished shardflow evaluate output")
        # Some kinds' canaries are judged without the Evaluator's answers for them (Task.needs_canary_predictions).
        task = task_for(read_model_info(self.model).task)
        needed = (CANARIES, CANARY_PREDICTIONS) if task.needs_canary_predictions else (CANARIES,)
        missing = [n for n in needed if not storage.is_file(storage.join(self.evaluation, n))]
        if missing:
            raise ConfigError(f"evaluation {self.evaluation!r} has no {' or '.join(missing)}: "
                              "evaluate the model again with this version of shardflow")
