"""`shardflow compile` and `shardflow run`: flags → the compiler and the local runner. Nothing else.

    shardflow compile --output pipeline.yaml --image REGISTRY/shardflow@sha256:DIGEST \
        [--param NAME=VALUE ...] [--mount-pvc CLAIM=PATH ...] [--node-selector KEY=VALUE ...] \
        [--toleration KEY[=VALUE]:EFFECT ...]
    shardflow run --index train=d/train.csv --index eval=d/eval.csv --data-root d --output runs/demo \
        [--train-args "--epochs 5"] [--threshold accuracy>=0.9] [--beam-args "--direct_num_workers=2"] [--verbose]
    shardflow run --index 'train=d/span-{SPAN}/train.csv' --index 'eval=d/span-{SPAN}/eval.csv' --spans 2 ...

kfp is imported only when one of them runs (it costs seconds).
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from .cluster_options import add_cluster_arguments, check_image, cluster_options_from_args
from .params import parse_param_args


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--output", required=True, help="where to write the compiled pipeline (YAML)")
    add("--image", required=True, help="the shardflow component image, by digest (built from k8s/Dockerfile)")
    add("--param", action="append", default=[], metavar="NAME=VALUE",
        help="default of a pipeline parameter, baked into the IR (lists as JSON); repeatable")
    add_cluster_arguments(parser)


def compile_main(args: argparse.Namespace, _: list[str]) -> int:
    image, cluster, params = check_image(args.image), cluster_options_from_args(args), parse_param_args(args.param)
    from .compiler import compile_pipeline  # kfp costs seconds: after the flags are checked

    print(f"compiled pipeline: {compile_pipeline(args.output, image, cluster, params)}")
    return 0


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--index", action="append", required=True, metavar="[SPLIT=]CSV", help="index file; repeatable")
    add("--data-root", required=True, help="directory the index paths are relative to")
    add("--output", required=True, help="run directory: pipeline_root/, serving/, runs/")
    add("--example-gen-args", default="", help="extra `shardflow example-gen` flags, one string")
    add("--transform-args", default="", help="extra `shardflow transform` flags, one string")
    add("--train-args", default="--epochs 10", help="`shardflow train` flags (default '--epochs 10')")
    add("--beam-args", default="", help="Beam pipeline options for ExampleGen and Transform, one string")
    add("--drift-threshold", type=float, default=0.1)
    add("--validation-warn-only", action="store_true", help="data anomalies warn instead of failing the run")
    add("--validation-schema", default="", help="a curated schema.pbtxt to validate against (default: inferred on train)")
    add("--threshold", action="append", metavar="METRIC>=VALUE",
        help="blessing threshold; repeatable (default: accuracy>=0.9, or mean_iou>=0.5 when the index has a mask)")
    add("--max-regression", action="append", default=[], metavar="METRIC=DELTA")
    add("--slice-by", action="append", default=[], metavar="COLUMN")
    add("--spans", type=int, default=1, help="with {SPAN} or {YYYY}{MM}{DD} in --index: the newest N spans")
    add("--warm-start", default="latest", help="'latest' (the served model, if any), a model dir, or ''")
    add("--baseline", default="latest", help="'latest' (the served model, if any), a model dir, or ''")
    add("--verbose", action="store_true", help="also print the framework logs (always kept in the run's logs/)")


def run_main(args: argparse.Namespace, _: list[str]) -> int:
    from .local_run import LocalRunConfig, run_locally

    config = LocalRunConfig(
        index=tuple(args.index), data_root=args.data_root, output=args.output,
        example_gen_options=tuple(shlex.split(args.example_gen_args)),
        transform_options=tuple(shlex.split(args.transform_args)),
        train_options=tuple(shlex.split(args.train_args)), beam_args=tuple(shlex.split(args.beam_args)),
        drift_threshold=args.drift_threshold, validation_warn_only=args.validation_warn_only,
        validation_schema=args.validation_schema,
        eval_thresholds=tuple(args.threshold) if args.threshold else None,  # None: the index's task's default
        max_regressions=tuple(args.max_regression),
        slice_by=tuple(args.slice_by), warm_start=args.warm_start, baseline_model=args.baseline, spans=args.spans)
    try:
        summary = run_locally(config, verbose=args.verbose)
    except RuntimeError as err:  # kfp.local: a step failed; its own message ends the output
        outcome = _newest_outcome(config.output) or {}
        print(f"shardflow run: {outcome.get('message') or str(err).splitlines()[0]}", file=sys.stderr)
        return 1
    return 0 if summary.get("run") else 1


def _newest_outcome(output: str) -> dict | None:
    from .local_run import summarize

    return summarize(Path(output).resolve()).get("outcome")
