"""A model call's batch sized in bytes: what one example costs is measured, then fitted to a budget.

A model's activations grow with its batch: a 256-px U-Net holds ~27 MB an example while it runs,
a 28-px LeNet a few kB. A batch given as a count of examples is therefore either wasteful or out
of memory depending on the model, so every step that scores with a model sizes its batch here:

    sizing = size_batch([call], first_records, budget_bytes=1 << 30)  # call(records) runs a model
    sizing.batch_size, sizing.example_bytes                          # e.g. 37, 28_311_552

How an example is measured: the process's peak resident memory (Linux's VmHWM, reset by writing
"5" to /proc/self/clear_refs) is read around a call on one example and a call on `PROBE_EXAMPLES`;
the extra peak per extra example is one example's cost. A first call on one example runs before
either, so one-time costs (graph optimization, thread pools) are not counted as an example's.
Before each measured call, glibc's `malloc_trim` hands the memory freed by earlier calls back to
the kernel: memory kept for reuse would otherwise hide part of the next call's growth (and make
the second of two models look cheaper than it is). Where the peak cannot be reset (not Linux),
nothing is measured and `UNMEASURED_BATCH` is used.

>>> batch_for(example_bytes=27 << 20, budget_bytes=1 << 30)      # a 256-px U-Net, 1 GB
37
>>> batch_for(example_bytes=6_000, budget_bytes=1 << 30)         # a LeNet: capped at MAX_BATCH
512
>>> check_fits(512, example_bytes=27 << 20, budget_bytes=1 << 30, option="--batch-size")
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: --batch-size 512 needs about 13,824 MB for the model's activations (27.0 MB an example, measured), over the 1,024 MB budget: lower --batch-size or raise --memory-mb
"""
from __future__ import annotations

import ctypes
import ctypes.util
import re
from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

from .errors import ConfigError

MB = 1 << 20
# The activation budget of one call that the infra check's timed batch sizes must fit: at 1 GB a 256-px
# U-Net's batch of 32 (~0.9 GB), the probe's largest default, fits.
DEFAULT_BUDGET_MB = 1024
# The default budget a scoring step (Evaluator, predict, the label finder) sizes its batch from. Measured
# (224-px photos, LeNet, 600 eval examples): 256 MB scores as fast as 1 GB (batches of 71 against 288:
# 2.4 and 2.6 s) at 887 against 1,503 MB peak RSS; on 256-px U-Nets batches of 41 were faster than all 100
# (34 against 44 s). A 256-px U-Net scores 9 examples a call, a 512-px one 2: a CPU call is past its
# per-call overhead at a few examples of that size.
SCORING_BUDGET_MB = 256
# The most examples in one call, whatever the budget: the Evaluator's earlier fixed batch, where a
# small classifier's throughput no longer changes (the per-call overhead is amortized long before).
MAX_BATCH = 512
PROBE_EXAMPLES = 4  # the second probe call: 3 examples' growth stands out of allocator noise
UNMEASURED_BATCH = 32  # where the peak cannot be measured: the Trainer's usual batch, which fitted there
_STATUS, _CLEAR_REFS = "/proc/self/status", "/proc/self/clear_refs"


@dataclass(frozen=True)
class BatchSizing:
    """The batch a step calls its model with, and why."""

    batch_size: int
    example_bytes: int | None  # measured activations of one example; None when it could not be measured
    budget_bytes: int
    rule: str  # "budget" (sized from the measurement) or "explicit" (given, checked against the budget)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def describe(self) -> str:
        cost = "unmeasured" if self.example_bytes is None else f"{self.example_bytes / MB:,.1f} MB an example"
        return f"batches of {self.batch_size} ({self.rule}; {cost}, budget {self.budget_bytes // MB:,} MB)"


def _status_bytes(field: str) -> int:
    with open(_STATUS) as status:
        match = re.search(rf"^{field}:\s+(\d+) kB", status.read(), re.MULTILINE)
    if match is None:
        raise OSError(f"{_STATUS} has no {field}")
    return int(match.group(1)) * 1024


def _reset_peak() -> bool:
    """Sets the process's peak RSS back to its current RSS; False where the kernel offers no reset."""
    try:
        with open(_CLEAR_REFS, "w") as clear_refs:
            clear_refs.write("5")
        return True
    except OSError:
        return False


def trim_heap() -> None:
    """Returns freed heap memory to the kernel (glibc); elsewhere nothing happens. After a model call,
    glibc's arenas keep what the call freed, so the next call's peak would stand on top of it."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def _peak_growth(call: Callable[[Sequence[bytes]], Any], records: Sequence[bytes]) -> int:
    """How far one call raises the process's peak RSS above the RSS it started from."""
    trim_heap()
    _reset_peak()
    before = _status_bytes("VmRSS")
    call(records)
    return max(0, _status_bytes("VmHWM") - before)


def measure_example_bytes(call: Callable[[Sequence[bytes]], Any], records: Sequence[bytes]) -> int | None:
    """The activation bytes one more example adds to a call; None without 2 records or a peak reset."""
    if len(records) < 2 or not _reset_peak():
        return None
    call(records[:1])  # one-time costs: graph optimization, thread pools, caches
    many = min(len(records), PROBE_EXAMPLES)
    try:
        one = _peak_growth(call, records[:1])
        return max(0, _peak_growth(call, records[:many]) - one) // (many - 1)
    except OSError:  # a /proc without VmHWM (some sandboxes): measured nothing
        return None


def batch_for(example_bytes: int | None, budget_bytes: int, cap: int = MAX_BATCH) -> int:
    """The most examples whose activations fit the budget (at least 1, at most `cap`)."""
    if example_bytes is None:
        return min(cap, UNMEASURED_BATCH)
    return max(1, min(cap, budget_bytes // max(1, example_bytes)))


def check_fits(batch_size: int, example_bytes: int | None, budget_bytes: int, option: str) -> None:
    """ConfigError (one line) when `batch_size` examples need more than the budget."""
    if example_bytes is None or batch_size * example_bytes <= budget_bytes:
        return
    raise ConfigError(f"{option} {batch_size} needs about {batch_size * example_bytes / MB:,.0f} MB for the model's "
                      f"activations ({example_bytes / MB:,.1f} MB an example, measured), over the "
                      f"{budget_bytes / MB:,.0f} MB budget: lower {option} or raise --memory-mb")


def size_batch(calls: Sequence[Callable[[Sequence[bytes]], Any]], records: Sequence[bytes], budget_bytes: int,
               requested: int | None = None, option: str = "--batch-size", cap: int = MAX_BATCH) -> BatchSizing:
    """Measures an example of each model call on `records` (the first few of the data; the models are
    called one after the other, so the costliest one counts), then sizes or checks the batch."""
    measured = [measure_example_bytes(call, records) for call in calls]
    example_bytes = None if None in measured or not measured else max(measured)  # type: ignore[type-var]
    if requested is None:
        return BatchSizing(batch_for(example_bytes, budget_bytes, cap), example_bytes, budget_bytes, "budget")
    check_fits(requested, example_bytes, budget_bytes, option)
    return BatchSizing(requested, example_bytes, budget_bytes, "explicit")


def budget_bytes(memory_mb: float) -> int:
    return int(memory_mb * MB)
