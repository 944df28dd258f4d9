"""`shardflow validate`: translates command-line flags into a ValidationConfig. Nothing else.

    shardflow validate --examples runs/examples --output runs/validation \
        [--drift-threshold 0.1] [--baseline-split train] [--schema curated.pbtxt] [--no-drift id] [--warn-only]

Exit status: 0 when the data passed (or --warn-only), 1 when anomalies were found (the anomalies in
brief and the report's path on stderr), 2 on a bad option.
"""
from __future__ import annotations

import argparse

from ..core.flag_parser import config_from_flags
from ..core.pipeline_flags import expose
from .config import ValidationConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--examples", required=True,
        help="ExampleGen output directory (manifest.json, statistics/, schema.pbtxt): a path or s3:// / gs:// URI")
    add("--output", required=True, help="output directory (path or URI): report.md, report.html, anomalies.json, tfdv/")
    expose(add("--drift-threshold", type=float, default=0.1,
        help="largest allowed drift of a split against the baseline: L-infinity distance for string features, "
             "Jensen-Shannon divergence for numeric ones (default 0.1)"))
    add("--baseline-split", default="train", help="split the others are compared with (default train)")
    expose(add("--schema", help="a curated schema.pbtxt (path or URI) instead of the one ExampleGen inferred on train"),
           "validation_schema", "--validation-schema")
    add("--no-drift", action="append", default=[], metavar="FEATURE",
        help="do not compare this feature for drift (ids, timestamps); repeatable")
    expose(add("--warn-only", action="store_true", help="report anomalies as warnings and exit 0"),
           "validation_warn_only", "--validation-warn-only")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> ValidationConfig:
    del extra  # not a Beam command: always empty (shardflow.cli and the pipeline steps refuse unknown flags)
    return config_from_flags(ValidationConfig, args, fail_on_anomalies=not args.warn_only,
                             drift_exclude=tuple(args.no_drift))
