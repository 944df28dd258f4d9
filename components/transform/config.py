"""Transform's options: one frozen dataclass that checks itself and names the bad value.

>>> cfg = TransformConfig(examples="runs/examples", output="runs/transform")
>>> cfg.unseen_labels, cfg.analyze_split
('oov', 'train')
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ..core.errors import ConfigError
from ..core.config_values import require_apart, require_locations
from ..core.input_checks import check_examples

UNSEEN_LABEL_POLICIES = ("oov", "fail")
COMPRESSIONS = ("", "GZIP")
# The module part may be a URI (s3://b/prep.py): the function is after the last colon.
_PREPROCESSING = re.compile(r"^(?P<module>.+):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")

__all__ = ["ConfigError", "TransformConfig", "UNSEEN_LABEL_POLICIES"]


@dataclass(frozen=True, kw_only=True)
class TransformConfig:
    """Everything one Transform run needs; `beam_args` pass through to Beam untouched.

    `mask_classes` maps a mask feature to its number of classes (ids must lie in [0, K));
    a mask without an entry takes train's largest id + 1. `compression` None keeps the input's.
    `min_shards` None keeps the `min_shards` ExampleGen was run with. `examples`, `output` and a
    preprocessing module file may be local paths or URIs (s3://, gs://); what they hold is checked
    when the run starts, not here.
    """

    examples: str
    output: str
    preprocessing: str | None = None  # "path/to/mod.py:fn", "s3://b/mod.py:fn" or "package.module:fn"; None: default
    analyze_split: str = "train"
    mask_classes: tuple[tuple[str, int], ...] = ()
    unseen_labels: str = "oov"  # oov: an extra id, counted and reported; fail: the run fails
    compression: str | None = None
    shard_size_mb: float = 128.0
    num_shards: int | None = None
    min_shards: int | None = None
    batch_size: int | None = None  # examples per Arrow batch; None: ~4 MB of input payload
    beam_args: tuple[str, ...] = ()
    progress_seconds: float = 15.0

    def check_inputs(self) -> None:
        """The checks that read storage, before the heavy imports: --examples is the right kind of output."""
        check_examples(self.examples)

    def __post_init__(self) -> None:
        require_locations(self, "examples", "output")
        require_apart(self.output, examples=self.examples)
        if self.preprocessing is not None and not _PREPROCESSING.match(self.preprocessing):
            raise ConfigError(f"preprocessing must be MODULE:FUNCTION (a file path.py or an importable module), "
                              f"got {self.preprocessing!r}")
        if self.unseen_labels not in UNSEEN_LABEL_POLICIES:
            raise ConfigError(f"unseen_labels must be one of {UNSEEN_LABEL_POLICIES}, got {self.unseen_labels!r}")
        if self.compression is not None and self.compression not in COMPRESSIONS:
            raise ConfigError(f"compression must be one of {COMPRESSIONS} or None, got {self.compression!r}")
        for name, classes in self.mask_classes:
            if isinstance(classes, bool) or not isinstance(classes, int) or classes < 1:
                raise ConfigError(f"mask_classes of {name!r} must be an integer >= 1, got {classes!r}")
        if not self.progress_seconds > 0:
            raise ConfigError(f"progress_seconds must be > 0, got {self.progress_seconds!r}")
        if not self.shard_size_mb > 0:
            raise ConfigError(f"shard_size_mb must be > 0, got {self.shard_size_mb!r}")
        for name in ("num_shards", "min_shards", "batch_size"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {value!r}")

    @property
    def preprocessing_parts(self) -> tuple[str, str] | None:
        """(module or file path, function name), or None for the default preprocessing."""
        if self.preprocessing is None:
            return None
        match = _PREPROCESSING.match(self.preprocessing)
        assert match is not None  # checked in __post_init__
        return match.group("module"), match.group("function")
