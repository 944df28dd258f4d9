"""`shardflow track`: translates command-line flags into a TrackConfig. Nothing else.

    shardflow track --output runs/digits --tracking-uri http://127.0.0.1:5000 [--run shardflow-...]

Exit status: 0 when sent (or there already); 2 on a bad flag or an unreachable server; 1 when sending failed.
"""
from __future__ import annotations

import argparse
import os

from .config import DEFAULT_ALIAS, TrackConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_tracking_arguments(parser)
    parser.add_argument("--output", required=True, help="the directory `shardflow run --output` wrote")
    parser.add_argument("--run", action="append", default=[], dest="runs",
                        help="only this run (RUN/pipeline_root/<name>; repeatable); default: every finished run")


def add_tracking_arguments(parser: argparse.ArgumentParser, required: bool = True) -> None:
    """The flags `shardflow track` and `shardflow run` share."""
    env = os.environ.get("MLFLOW_TRACKING_URI")
    parser.add_argument("--tracking-uri", default=env, required=required and env is None,
                        help="the MLflow tracking server (http://HOST:PORT) or file store (file:DIR); "
                             "default: $MLFLOW_TRACKING_URI")
    parser.add_argument("--experiment", default=None, help="the MLflow experiment; default: the output folder's name")
    parser.add_argument("--registered-model", default=None,
                        help="the registry's model that follows CURRENT.json; default: the output folder's name; "
                             "'' for none")
    parser.add_argument("--alias", default=DEFAULT_ALIAS, help="the alias on the version served (default: champion)")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> TrackConfig:
    del extra
    return TrackConfig(output=args.output, tracking_uri=args.tracking_uri or "", experiment=args.experiment,
                       runs=tuple(args.runs), registered_model=args.registered_model, alias=args.alias)
