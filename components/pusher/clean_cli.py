"""`shardflow clean-serving`: translates command-line flags into a CleanServingConfig. Nothing else.

    shardflow clean-serving --serving-dir s3://b/serving [--stale-claims-after 3600] [--keep 3 [--protect 4]
        [--tracking-uri URI [--registered-model NAME] [--alias champion]]]

Exit status: 0 when done; 2 on a bad flag or an unreachable tracking server; 1 when the store failed.
"""
from __future__ import annotations

import argparse
import os

from ..core import storage
from .cli import add_serving_arguments, tf_serving_from_args
from .config import CleanServingConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serving_arguments(parser)
    add = parser.add_argument
    add("--keep", type=int, default=None, metavar="K",
        help="also remove the served versions beyond the K most recent; never the pointer's, a canary's, a --protect "
             "one or the registry alias's (with --tracking-uri)")
    add("--protect", type=int, action="append", default=[], metavar="N", help="a version --keep never removes")
    add_registry_arguments(parser, "with --keep: the MLflow registry whose alias's version is kept",
                           "the registry alias whose version is kept")


def add_registry_arguments(parser: argparse.ArgumentParser, tracking_help: str, alias_help: str) -> None:
    """--tracking-uri, --registered-model, --alias of a command that reads or moves the alias of the registered
    model following a serving directory (clean-serving; promote and rollback --inference-service)."""
    add = parser.add_argument
    add("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", ""),
        help=f"{tracking_help} (default: $MLFLOW_TRACKING_URI)")
    add("--registered-model", default=None,
        help="the registry's model that follows this serving directory; default: the folder above it")
    add("--alias", default="champion", help=f"{alias_help} (default: %(default)s)")


def registered_model_from_args(args: argparse.Namespace) -> str:
    """--registered-model, by default as `shardflow track` names it: the run output's folder, which holds serving/."""
    if args.registered_model is not None:
        return args.registered_model
    return storage.basename(storage.parent(os.path.abspath(args.serving_dir) if not storage.is_remote(
        args.serving_dir) else args.serving_dir.rstrip("/")))


def config_from_args(args: argparse.Namespace, extra: list[str]) -> CleanServingConfig:
    del extra
    tracking = args.tracking_uri if args.keep is not None else ""
    model = registered_model_from_args(args)
    return CleanServingConfig(serving_dir=args.serving_dir, tf_serving=tf_serving_from_args(args),
                              stale_claims_after=args.stale_claims_after, keep=args.keep,
                              protect=frozenset(args.protect), tracking_uri=tracking, registered_model=model,
                              alias=args.alias)
