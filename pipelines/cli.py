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

from ..core.config_values import require_positive
from .cluster_options import add_cluster_arguments, check_image, cluster_options_from_args
from .local_cache import CACHEABLE_STEPS, check_no_cache
from .params import parse_param_args


def add_compile_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--output", required=True, help="where to write the compiled pipeline (YAML)")
    add("--image", required=True, help="the shardflow component image, by digest (built from k8s/Dockerfile)")
    add("--param", action="append", default=[], metavar="NAME=VALUE",
        help="default of a pipeline parameter, baked into the IR (lists as JSON); repeatable")
    add_no_cache_argument(parser, "compiled with KFP's caching off")
    add_cluster_arguments(parser)


def add_no_cache_argument(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--no-cache", action="extend", nargs="?", const=["all"], default=[], type=lambda v: [v],
                        metavar="STEP", help=f"a step {what}: {', '.join(CACHEABLE_STEPS)}; alone: every step; "
                                             "repeatable")


def compile_main(args: argparse.Namespace, _: list[str]) -> int:
    image = check_image(args.image, args.allow_mutable_image)
    cluster, params = cluster_options_from_args(args), parse_param_args(args.param)
    no_cache = check_no_cache(tuple(args.no_cache))
    from .compiler import compile_pipeline  # kfp costs seconds: after the flags are checked

    path = compile_pipeline(args.output, image, cluster, params, no_cache, args.allow_mutable_image)
    print(f"compiled pipeline: {path}")
    return 0


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--index", action="append", required=True, metavar="[SPLIT=]CSV", help="index file; repeatable")
    add("--data-root", required=True, help="directory the index paths are relative to")
    add("--output", required=True, help="run directory: pipeline_root/, serving/, runs/")
    add("--example-gen-args", default="", help="extra `shardflow example-gen` flags, one string")
    add("--transform-args", default="", help="extra `shardflow transform` flags, one string")
    add("--train-args", default="--epochs 10", help="`shardflow train` flags (default '--epochs 10')")
    add("--tune-args", default="", help="`shardflow tune` flags: a hyperparameter search before training, whose "
                                        "trials take --train-args, e.g. '--max-trials 8 --space learning_rate=log:1e-4:1e-1'")
    add("--beam-args", default="", help="Beam pipeline options for ExampleGen, Transform and predict, one string")
    add("--drift-threshold", type=float, default=0.1,
        help="largest allowed drift of a split against train: L-infinity distance for string features, "
             "Jensen-Shannon divergence for numeric ones (default 0.1)")
    add("--validation-warn-only", action="store_true", help="data anomalies warn instead of failing the run")
    add("--validation-schema", default="", help="a curated schema.pbtxt to validate against (default: inferred on train)")
    add("--validate-args", default="", help="extra `shardflow validate` flags, one string, e.g. '--no-drift site'")
    add("--threshold", action="append", metavar="METRIC>=VALUE",
        help="blessing threshold; repeatable (default: accuracy>=0.9, or mean_iou>=0.5 when the index has a mask)")
    add("--max-regression", action="append", default=[], metavar="METRIC=DELTA",
        help="largest allowed worsening of METRIC against the served model, e.g. accuracy=0.02; repeatable")
    add("--regression-tolerance", default="auto", metavar="AMOUNT|auto|off",
        help="with a served model, each threshold metric may be at most this much worse than the served one's, "
             "unless --max-regression names it (default auto: 0.03 under the non-inferiority gate, 0.01 under "
             "point); 'off': no such gate")
    add("--gate", default="non-inferiority", choices=("point", "non-inferiority", "strict"),
        help="the Evaluator's gate rule (default non-inferiority: the 95%% interval of the paired difference "
             "with the served model must exclude a worsening beyond the allowance; point: point estimates)")
    add("--bootstrap-resamples", type=int, default=1000, metavar="B",
        help="resamples of the eval examples for the Evaluator's 95%% intervals (default 1000)")
    add("--bootstrap-seed", type=int, default=0, help="their seed (default 0)")
    add("--slice-by", action="append", default=[], metavar="COLUMN")
    add("--infra-validate-args", default="", help="extra `shardflow infra-validate` flags, one string, e.g. "
                                                  "'--batch-sizes 1,64 --tolerance 1e-3'")
    add("--predict-index", default="", metavar="CSV",
        help="after Push, label this CSV's files with the pushed model (`shardflow predict`)")
    add("--predict-data-root", default="", help="what --predict-index's paths are relative to (default: --data-root)")
    add("--predict-args", default="", help="extra `shardflow predict` flags, one string, e.g. '--top-k 5 --format parquet'")
    add("--spans", type=int, default=1, help="with {SPAN} or {YYYY}{MM}{DD} in --index: the newest N spans")
    add("--warm-start", default="latest", help="'latest' (the served model, if any), a model dir, or ''")
    add("--baseline", default="latest", help="'latest' (the served model, if any), a model dir, or ''")
    add_no_cache_argument(parser, "that always runs, never reusing an earlier run's outputs")
    add("--verbose", action="store_true", help="also print the steps' logs (always kept in the run's logs/)")
    add("--isolated", action="store_true",
        help="each step in a fresh process (slower: every step imports TensorFlow again); for debugging, and the "
             "reference the warm worker is checked against")
    add("--worker-max-rss-mb", type=float, default=None, metavar="MB",
        help="replace the warm step worker when its own RSS passes MB (default 4096)")


def run_main(args: argparse.Namespace, _: list[str]) -> int:
    from .local_run import LocalRunConfig, run_locally

    config = LocalRunConfig(
        index=tuple(args.index), data_root=args.data_root, output=args.output,
        example_gen_options=tuple(shlex.split(args.example_gen_args)),
        transform_options=tuple(shlex.split(args.transform_args)),
        train_options=tuple(shlex.split(args.train_args)), beam_args=tuple(shlex.split(args.beam_args)),
        tune_options=tuple(shlex.split(args.tune_args)),
        drift_threshold=args.drift_threshold, validation_warn_only=args.validation_warn_only,
        validation_schema=args.validation_schema, validation_options=tuple(shlex.split(args.validate_args)),
        regression_tolerance=args.regression_tolerance, no_cache=tuple(args.no_cache), eval_gate=args.gate,
        bootstrap_resamples=args.bootstrap_resamples, bootstrap_seed=args.bootstrap_seed,
        eval_thresholds=tuple(args.threshold) if args.threshold else None,  # None: the index's target kind's
        max_regressions=tuple(args.max_regression),
        slice_by=tuple(args.slice_by), warm_start=args.warm_start, baseline_model=args.baseline, spans=args.spans,
        infra_validation_options=tuple(shlex.split(args.infra_validate_args)), predict_index=args.predict_index,
        predict_data_root=args.predict_data_root, predict_options=tuple(shlex.split(args.predict_args)))
    limit = {}
    if args.worker_max_rss_mb is not None:
        require_positive("--worker-max-rss-mb", args.worker_max_rss_mb, "megabytes")
        limit["worker_max_rss_mb"] = args.worker_max_rss_mb
    summary = run_locally(config, verbose=args.verbose, isolated=args.isolated, **limit)  # a failed step: StepFailed
    return 0 if summary.get("run") else 1
