"""`shardflow compile` and `shardflow run`: flags → the compiler and the local runner. Nothing else.

    shardflow compile --output pipeline.yaml --image REGISTRY/shardflow@sha256:DIGEST \
        [--param NAME=VALUE ...] [--mount-pvc CLAIM=PATH ...] [--node-selector KEY=VALUE ...] \
        [--toleration KEY[=VALUE]:EFFECT ...]
    shardflow run --index train=d/train.csv --index eval=d/eval.csv --data-root d --output runs/demo \
        [--train-args "--epochs 5"] [--threshold accuracy>=0.9] [--beam-args "--direct_num_workers=2"] [--verbose] \
        [--tracking-uri http://127.0.0.1:5000 [--experiment E] [--registered-model M] [--alias champion]]
    shardflow run --index 'train=d/span-{SPAN}/train.csv' --index 'eval=d/span-{SPAN}/eval.csv' --spans 2 ...

kfp is imported only when one of them runs (it costs seconds).
"""
from __future__ import annotations

import argparse
import shlex

from ..core.config_values import require_positive
from ..tracking.cli import add_tracking_arguments
from ..tracking.config import TrackConfig
from .cluster_options import add_cluster_arguments, check_image, cluster_options_from_args
from .local_cache import CACHEABLE_STEPS, check_no_cache
from .params import parse_param_args
from .step_parameters import add_step_arguments, step_values


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
    add("--beam-args", default="", help="Beam pipeline options for ExampleGen, Transform and predict, one string")
    add_step_arguments(parser)  # each step's --X-args, and its command's exposed flags (core/pipeline_flags.expose)
    add("--predict-index", default="", metavar="CSV",
        help="after Push, label this CSV's files with the pushed model (`shardflow predict`)")
    add("--predict-data-root", default="", help="what --predict-index's paths are relative to (default: --data-root)")
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
    add_tracking_arguments(parser, required=False)  # off unless --tracking-uri or $MLFLOW_TRACKING_URI


def run_main(args: argparse.Namespace, _: list[str]) -> int:
    from .local_run import LocalRunConfig, run_locally

    config = LocalRunConfig(
        index=tuple(args.index), data_root=args.data_root, output=args.output,
        beam_args=tuple(shlex.split(args.beam_args)), no_cache=tuple(args.no_cache), warm_start=args.warm_start, baseline_model=args.baseline, spans=args.spans,
        predict_index=args.predict_index, predict_data_root=args.predict_data_root, **step_values(args))
    limit = {}
    if args.worker_max_rss_mb is not None:
        require_positive("--worker-max-rss-mb", args.worker_max_rss_mb, "megabytes")
        limit["worker_max_rss_mb"] = args.worker_max_rss_mb
    tracking = None
    if args.tracking_uri:
        tracking = TrackConfig(output=args.output, tracking_uri=args.tracking_uri, experiment=args.experiment,
                               registered_model=args.registered_model, alias=args.alias)
    summary = run_locally(config, verbose=args.verbose, isolated=args.isolated, tracking=tracking,
                          **limit)  # a failed step: StepFailed
    return 0 if summary.get("run") else 1
