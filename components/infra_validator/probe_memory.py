"""The probe's memory check: an example's activations measured, a batch over the budget said in one line.

As `shardflow.core.batch_memory` measures them (the peak RSS of a call on 1 canary and on `PROBE_EXAMPLES`, Linux's
VmHWM reset between calls), repeated here because the probe imports no shardflow: probe.py loads this file by
path (`python -I` leaves its folder off sys.path). It imports nothing but the standard library.

    >>> batch_problem("serving_default", [1, 8], example=None, budget=1 << 20) is None  # not measured: not judged
    True
    >>> batch_problem("serving_default", [1, 8], example=1 << 20, budget=4 << 20).split(":")[0]
    "batch size 8 of 'serving_default' needs about 8 MB for the model's activations (1.0 MB an example, measured), over the 4 MB budget"
"""
from __future__ import annotations

import ctypes
import os
from typing import Any, Callable, Sequence

PROBE_EXAMPLES = 4  # as core.batch_memory.PROBE_EXAMPLES
MB = 1 << 20


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith(f"{field}:"))
    return int(line.split()[1]) * 1024


def _peak_growth(call: Callable[[], Any]) -> int:
    """How far `call()` raises the peak RSS above the RSS it starts from (freed heap handed back first)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")
    before = _status_bytes("VmRSS")
    call()
    return max(0, _status_bytes("VmHWM") - before)


def example_bytes(call: Callable[[Sequence[bytes]], Any], values: Sequence[bytes]) -> int | None:
    """Activation bytes one more example adds to `call(values)` (core.batch_memory's measurement); None off Linux."""
    many = min(len(values), PROBE_EXAMPLES)
    if many < 2 or not os.path.exists("/proc/self/clear_refs"):
        return None
    try:
        call(values[:1])
        one = _peak_growth(lambda: call(values[:1]))
        return max(0, _peak_growth(lambda: call(values[:many])) - one) // (many - 1)
    except OSError:
        return None


def batch_problem(signature: str, sizes: Sequence[int], example: int | None, budget: int | None) -> str | None:
    """The line saying the largest batch's activations would exceed the budget; None when they fit (or unknown)."""
    if example is None or budget is None or max(sizes) * example <= budget:
        return None
    return (f"batch size {max(sizes)} of {signature!r} needs about {max(sizes) * example / MB:,.0f} MB for "
            f"the model's activations ({example / MB:,.1f} MB an example, measured), over the "
            f"{budget / MB:,.0f} MB budget: time smaller --batch-sizes or raise --memory-mb")
