"""95% bootstrap intervals on every overall metric, and on the candidate − baseline difference, paired.

    intervals = bootstrap_intervals(task, 3, {"cells": cells, "losses": losses},
                                    {"cells": baseline_cells, "losses": baseline_losses}, resamples=1000, seed=0)
    intervals["candidate"]["accuracy"], intervals["delta"]["accuracy"]      # [low, high] each

A resample draws N examples with replacement out of the N evaluated (a mask is one example: images
are resampled, never pixels). The draws are one seeded [B, N] index matrix, made in chunks of at
most `CHUNK_DRAWS` indices so memory stays bounded whatever N; every metric is recomputed from the
examples' own counts (slicing.Scores) for all B resamples at once, by the model's task (`task`, a confusion
kind of components/tasks/): its `bootstrap_arrays(data, num_classes)` prepares the per-example arrays once,
its `bootstrap_metrics(indices, weights, data, num_classes)` gives every metric of a chunk of resamples from
their indices and draw counts (a bincount of the drawn cells into confusion matrices; [B, N] × [N, K]
products of the draw counts with per-example columns). The baseline is resampled with the same draws
(examples are scored in the same order for both), so the difference is paired: a model against
itself gets [0, 0]. The interval is the 2.5th and 97.5th percentiles of the B values (percentile
bootstrap); resamples where a metric is undefined are left out of its interval.

>>> from shardflow.tasks import task_for
>>> labels = task_for("classification")
>>> cells = np.array([0, 0, 0, 3, 3, 1, 2, 3])                      # 2 classes: 6 right, 2 wrong
>>> out = bootstrap_intervals(labels, 2, {"cells": cells}, {"cells": cells}, resamples=200, seed=1)
>>> low, high = out["candidate"]["accuracy"]
>>> low <= 0.75 <= high, out["delta"]["accuracy"]
(True, [0.0, 0.0])
>>> out == bootstrap_intervals(labels, 2, {"cells": cells}, {"cells": cells}, resamples=200, seed=1)
True
"""
from __future__ import annotations

from typing import Any, Iterator

import numpy as np


CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 1000
DEFAULT_SEED = 0
# Indices drawn per chunk: small enough that the chunk's draw counts (b × N float64, 2 MB) stay in the
# CPU's cache while the bincount fills them: measured 2x faster than 1M-index chunks at N = 5,000.
CHUNK_DRAWS = 250_000
METHOD = "percentile bootstrap over examples (masks: over images), paired for the difference"

Arrays = dict[str, np.ndarray]


def resample_indices(n: int, resamples: int, seed: int, chunk_draws: int = CHUNK_DRAWS) -> Iterator[np.ndarray]:
    """[b, n] index matrices (int32 while N allows), b summing to `resamples`: row r is resample r's draws.

    One generator drawn in order, so the same seed gives the same resamples whatever the chunking.

    >>> [chunk.shape for chunk in resample_indices(4, 5, seed=0, chunk_draws=8)]
    [(2, 4), (2, 4), (1, 4)]
    """
    rng = np.random.default_rng(seed)
    per_chunk = max(1, chunk_draws // max(n, 1))
    done = 0
    while done < resamples:
        rows = min(per_chunk, resamples - done)
        yield rng.integers(0, n, size=(rows, n), dtype=np.int64 if n > 2**31 - 1 else np.int32)
        done += rows


def draw_counts(indices: np.ndarray, n: int) -> np.ndarray:
    """[b, n] float64: how many times each example was drawn in each resample.

    >>> draw_counts(np.array([[0, 0, 2], [1, 2, 2]]), 3).tolist()
    [[2.0, 0.0, 1.0], [0.0, 1.0, 2.0]]
    """
    rows = len(indices)
    flat = (indices + np.arange(0, rows * n, n)[:, None]).ravel()  # int64: row r's cells start at r * n
    return np.bincount(flat, minlength=rows * n).reshape(rows, n).astype(np.float64)


def percentile_interval(values: np.ndarray, confidence: float = CONFIDENCE) -> list[float | None]:
    """[low, high] percentiles of the defined values; [None, None] when none is defined.

    >>> percentile_interval(np.arange(101.0))
    [2.5, 97.5]
    """
    defined = values[~np.isnan(values)]
    if defined.size == 0:
        return [None, None]
    tail = (100.0 - 100.0 * confidence) / 2.0  # 2.5 exactly (1 - 0.95 is not 0.05 in floats)
    low, high = np.percentile(defined, [tail, 100.0 - tail])
    return [float(low), float(high)]


def resampled_metrics(task: Any, num_classes: int, models: list[Arrays], resamples: int,
                      seed: int) -> list[dict[str, np.ndarray]]:
    """Per model, every metric's [resamples] values; all models resampled with the same draws."""
    prepared = [task.bootstrap_arrays(data, num_classes) for data in models]
    n = len(prepared[0]["cells"])
    collected: list[dict[str, list[np.ndarray]]] = [{} for _ in models]
    for indices in resample_indices(n, resamples, seed):
        weights = draw_counts(indices, n)  # shared by every model: the pairing
        for data, into in zip(prepared, collected):
            for name, values in task.bootstrap_metrics(indices, weights, data, num_classes).items():
                into.setdefault(name, []).append(values)
    return [{name: np.concatenate(parts) for name, parts in into.items()} for into in collected]


def slice_intervals(task: Any, num_classes: int, ids: np.ndarray, keys: list[str], candidate: Arrays,
                    baseline: Arrays | None = None, resamples: int = DEFAULT_RESAMPLES,
                    seed: int = DEFAULT_SEED) -> dict[str, dict[str, Any]]:
    """Per slice value (`ids`: each example's index in `keys`), the intervals of its own examples alone:
    {key: {"candidate", "baseline", "delta"}}; the metrics a slice reports (no ECE).

    >>> from shardflow.tasks import task_for
    >>> cells = np.array([0, 0, 3, 1, 3, 3])
    >>> out = slice_intervals(task_for("classification"), 2, np.array([0, 0, 0, 1, 1, 1]), ["a", "b"],
    ...                       {"cells": cells}, resamples=100)
    >>> sorted(out), out["b"]["delta"], len(out["a"]["candidate"]["accuracy"])
    (['a', 'b'], None, 2)
    """
    def part(data: Arrays | None, chosen: np.ndarray) -> Arrays | None:
        if data is None:
            return None
        return {name: np.asarray(values)[chosen] for name, values in data.items()
                if values is not None and name != "confidences"}

    out = {}
    for index, key in enumerate(keys):
        chosen = ids == index
        found = bootstrap_intervals(task, num_classes, part(candidate, chosen), part(baseline, chosen), resamples, seed)
        out[key] = {role: found[role] for role in ("candidate", "baseline", "delta")}
    return out


def bootstrap_intervals(task: Any, num_classes: int, candidate: Arrays, baseline: Arrays | None = None,
                        resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """{"confidence", "resamples", "seed", "method", "candidate", "baseline", "delta"}: each model's and
    the paired difference's [low, high] per metric (baseline and delta None without a baseline). `task`: the
    model's (tasks.task_for(info.task)), a confusion kind with `bootstrap_arrays` and `bootstrap_metrics`."""
    models = [candidate] + ([baseline] if baseline is not None else [])
    values = resampled_metrics(task, num_classes, models, resamples, seed)
    out: dict[str, Any] = {"confidence": CONFIDENCE, "resamples": resamples, "seed": seed, "method": METHOD,
                           "candidate": {m: percentile_interval(v) for m, v in values[0].items()},
                           "baseline": None, "delta": None}
    if baseline is not None:
        out["baseline"] = {m: percentile_interval(v) for m, v in values[1].items()}
        out["delta"] = {m: percentile_interval(v - values[1][m]) for m, v in values[0].items() if m in values[1]}
    return out
