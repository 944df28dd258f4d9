"""The options of `core.input_stream.build_stream`: one small frozen group, checked when it is built (no TensorFlow).

>>> StreamOptions(batch_size=64, shuffle_mb=1.5, seed=0, repeat=True).shuffle_bytes
1500000
>>> StreamOptions(batch_size=0)
Traceback (most recent call last):
...
shardflow.core.errors.ConfigError: batch_size must be an integer >= 1, got 0
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import ConfigError
from .folds import FoldSelection
from .stream_position import WorkerSlice


# How long the Trainer waits for the service's next batch before it makes the batches itself. The longest normal
# wait is a job's first batch (every worker fills its shuffle window, then makes a global batch): 3.6 s for 224-px
# JPEG photos with the heavy augmentation through 2 workers on a 2-core machine at load 5 (training.json's
# longest_wait_seconds). 60 s leaves a 16-fold margin for bigger windows, slower stores and busier nodes, and a
# wait cut short costs only this process's CPU: the batches made here are the same, and the service's are taken
# again when they come. TensorFlow's client never gives up: with every worker gone it waits for tasks forever.
STALL_SECONDS = 60.0


@dataclass
class ServiceLog:
    """What the service did for one stream: batches `served` by the workers, `made_here` for a worker gone (or
    for all of them after a stall), `late` copies of batches already made here (dropped), `stale` batches of a
    restarted worker (dropped: a new job), `jobs` started, `stalls` (no batch for `STALL_SECONDS`) and the
    `longest_wait` for one. `examples_lost` and `examples_repeated` are counted from the batch indices handed
    on (`delivered`); `echo` says each event once."""

    echo: Callable[[str], None] = print
    served: int = 0
    made_here: int = 0
    late: int = 0
    stale: int = 0
    jobs: int = 0
    stalls: int = 0
    longest_wait: float = 0.0
    examples_lost: int = 0
    examples_repeated: int = 0

    def delivered(self, index: int, after: int | None, examples: int) -> int:
        """Counts batch `index` (of `examples` examples) handed on after batch `after` (None: a stream's first):
        the batches skipped over are lost, one at or before `after` repeated. Returns the new last index."""
        if after is not None and index > after + 1:
            self.examples_lost += (index - after - 1) * examples
        elif after is not None and index <= after:
            self.examples_repeated += examples
            return after
        return index

    def as_dict(self) -> dict[str, int | float]:
        return {"batches_served": self.served, "batches_made_here": self.made_here,
                "late_batches_dropped": self.late, "stale_batches_dropped": self.stale, "jobs": self.jobs,
                "stalls": self.stalls, "longest_wait_seconds": round(self.longest_wait, 2),
                "examples_lost": self.examples_lost, "examples_repeated": self.examples_repeated}


@dataclass(frozen=True, kw_only=True)
class ServiceJob:
    """A tf.data service job: the dispatcher's grpc://HOST:PORT, the job's name (one per stream start), the log
    the stream keeps of what the service did (core/served_stream.py), and `stall_seconds`: how long a wait for
    the next batch may last before this process makes the batches itself."""

    dispatcher: str
    name: str
    log: ServiceLog = field(default_factory=ServiceLog, compare=False)
    stall_seconds: float = STALL_SECONDS

    def __post_init__(self) -> None:
        wait = self.stall_seconds
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait) or wait <= 0:
            raise ConfigError(f"stall_seconds must be a number of seconds > 0, got {wait!r}")


@dataclass(frozen=True, kw_only=True)
class StreamOptions:
    """What a stream reads and how; the stages' order is input_stream's alone.

    - `batch_size`: examples per batch; `drop_remainder` drops a last partial batch.
    - `shuffle_mb`: megabytes (10^6 bytes) of serialized records shuffled before they are parsed
      (0: no shuffle); `seed` makes the order (and nothing else here) repeatable.
    - `deterministic`: with no shuffle, exactly the shards' order; False lets TensorFlow read
      several shards at once in any order.
    - `repeat`: every epoch again, in a new order. `folds`: only these folds' examples (`core.folds`).
    - `features`: only these (less to parse); `decode`: True decodes every file feature, False none
      (files stay their stored bytes: what a tf.Transform graph takes), or the names to decode.
    - `keep_serialized`: each example's stored bytes too, under `input_stream.SERIALIZED`.
    - `class_weights`: each class id's sample weight; `input_name`: the model input's name. Both take
      the model step's (inputs, targets) and make the (named inputs, targets[, weights]) of Keras' fit.
    - `start` (repeated streams): records of the endless order already consumed; the stream starts
      there (a resumed training run). `worker_slice`: this stream's part of each global batch
      (core/stream_position.py); its `count` is a whole number of `batch_size` batches.
    - `service` (repeated streams): a `ServiceJob`: the stream from its parse stage on runs on the tf.data
      service's workers, each on every N-th global batch; this stream receives the batches in order.
    """

    batch_size: int
    shuffle_mb: float = 0.0
    seed: int | None = None
    deterministic: bool = True
    repeat: bool = False
    drop_remainder: bool = False
    features: tuple[str, ...] | None = None
    decode: bool | tuple[str, ...] = True
    folds: FoldSelection | None = None
    keep_serialized: bool = False
    class_weights: tuple[float, ...] | None = None
    input_name: str | None = None
    start: int = 0
    worker_slice: WorkerSlice | None = None
    service: ServiceJob | None = None

    @property
    def shuffle_bytes(self) -> int:
        return int(self.shuffle_mb * 1_000_000)

    def __post_init__(self) -> None:
        if isinstance(self.batch_size, bool) or not isinstance(self.batch_size, int) or self.batch_size < 1:
            raise ConfigError(f"batch_size must be an integer >= 1, got {self.batch_size!r}")
        mb = self.shuffle_mb
        if isinstance(mb, bool) or not isinstance(mb, (int, float)) or not math.isfinite(mb) or mb < 0:
            raise ConfigError(f"shuffle_mb must be a number of MB >= 0, got {mb!r}")
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)):
            raise ConfigError(f"seed must be an integer or None, got {self.seed!r}")
        if self.features is not None:
            if isinstance(self.features, str) or not self.features or not all(isinstance(n,
                                                                                         str) for n in self.features):
                raise ConfigError(f"features must be a non-empty list of feature names, got {self.features!r}")
            object.__setattr__(self, "features", tuple(self.features))
        if not isinstance(self.decode, bool):
            if isinstance(self.decode, str) or not all(isinstance(n, str) for n in self.decode):
                raise ConfigError(f"decode must be True, False or feature names, got {self.decode!r}")
            object.__setattr__(self, "decode", tuple(self.decode))
        if self.folds is not None and not isinstance(self.folds, FoldSelection):
            raise ConfigError(f"folds must be a FoldSelection, got {self.folds!r}")
        if self.class_weights is not None:
            weights = tuple(self.class_weights)
            if not weights or not all(isinstance(w, (int, float)) and w >= 0 for w in weights):
                raise ConfigError(f"class_weights must be numbers >= 0, one per class, got {self.class_weights!r}")
            object.__setattr__(self, "class_weights", weights)
        for name in ("deterministic", "repeat", "drop_remainder", "keep_serialized"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        self._check_position()

    def _check_position(self) -> None:
        start, cut = self.start, self.worker_slice
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise ConfigError(f"start must be an integer >= 0, got {start!r}")
        if (start or cut is not None) and not self.repeat:
            raise ConfigError("start and worker_slice apply to a repeated stream (repeat=True)")
        if self.service is not None:
            if not isinstance(self.service, ServiceJob) or not self.repeat or cut is not None:
                raise ConfigError(f"service must be a ServiceJob of a repeated stream without a worker_slice, "
                                  f"got {self.service!r}")
        if cut is None:
            return
        if not isinstance(cut, WorkerSlice):
            raise ConfigError(f"worker_slice must be a WorkerSlice, got {cut!r}")
        if cut.count % self.batch_size or start % cut.global_batch:
            raise ConfigError(f"worker_slice {cut.count} of {cut.global_batch} needs whole batches of {self.batch_size}"
                              f" and a start ({start}) at a global batch's first record")


@dataclass(frozen=True)
class DecodeCrop:
    """The fused crop: only `window(batch_index, position_in_batch)` (int32 [y, x, h, w]) of the JPEG
    image `feature` is decoded, resized to the stored size (float32 in 0-255)."""

    feature: str
    window: Callable[[Any, Any], Any]
