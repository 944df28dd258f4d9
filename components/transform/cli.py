"""`shardflow transform`: translates command-line flags into a TransformConfig. Nothing else.

    shardflow transform --examples runs/examples --output runs/transform \
        [--preprocessing my_module.py:preprocessing_fn] [--mask-classes mask=3] [Beam pipeline options]

Flags it does not know are Beam pipeline options and pass through. Locally it runs on the
FnApiRunner in one process (TensorFlow uses every core there); `--direct_running_mode=multi_processing
--direct_num_workers=2` selects worker processes.
"""
from __future__ import annotations

import argparse

from ..core.flag_parser import config_from_flags
from .config import UNSEEN_LABEL_POLICIES, ConfigError, TransformConfig

_COMPRESSION = {"auto": None, "none": "", "gzip": "GZIP"}


def _mask_classes(text: str) -> tuple[str, int]:
    name, sep, classes = text.rpartition("=")
    if not sep or not name or not classes.isdigit():
        raise ConfigError(f"--mask-classes expects MASK=K such as mask=3, got {text!r}")
    return name, int(classes)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--examples", required=True, help="ExampleGen output directory (with manifest.json): a path or s3:// / gs:// URI")
    add("--output", required=True,
        help="output directory (path or URI): transform_graph/, Split-*/, statistics/, manifest.json")
    add("--preprocessing", metavar="MODULE:FUNCTION",
        help="a tf.Transform preprocessing_fn replacing the default: path/to/file.py:fn, s3://bucket/file.py:fn "
             "or package.module:fn")
    add("--analyze-split", default="train", help="split the analyzers run on (default train)")
    add("--mask-classes", action="append", default=[], metavar="MASK=K",
        help="number of classes of a mask (default: largest id in the analyze split + 1); ids >= K fail the run")
    add("--unseen-labels", choices=UNSEEN_LABEL_POLICIES, default="oov",
        help="a string label missing from the analyze split's vocabulary: oov = extra id, counted and reported "
             "(default); fail = the run fails")
    add("--compression", choices=sorted(_COMPRESSION), default="auto", help="shard compression (auto: as the input)")
    add("--shard-size-mb", type=float, default=128.0, help="target payload per shard (default 128)")
    add("--num-shards", type=int, help="fixed number of shards per split (instead of --shard-size-mb)")
    add("--min-shards", type=int, help="at least this many shards per split (default: as ExampleGen's run)")
    add("--batch-size", type=int, help="examples per transformed batch (default: ~4 MB of input per batch)")
    add("--progress-seconds", type=float, default=15.0, help="progress print interval")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> TransformConfig:
    """`extra` are Beam's own options (--runner, --direct_num_workers, ...)."""
    return config_from_flags(TransformConfig, args, mask_classes=tuple(_mask_classes(m) for m in args.mask_classes),
                             compression=_COMPRESSION[args.compression], beam_args=tuple(extra))
