"""`shardflow rollback`: translates command-line flags into a RollbackConfig. Nothing else.

    shardflow rollback --serving-dir s3://b/serving --version 3 [--model-name shardflow] [--serving-base-path P]

Exit status: 0 when version 3 is served (again); 2 when it was never served there or a flag is bad; 75 when
another push moved the pointer meanwhile (nothing changes: roll back again); 1 when its copy changed or is gone.
"""
from __future__ import annotations

import argparse

from .cli import add_serving_arguments, tf_serving_from_args
from .config import RollbackConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serving_arguments(parser)
    parser.add_argument("--version", type=int, required=True, help="the served version to serve again")


def config_from_args(args: argparse.Namespace, extra: list[str]) -> RollbackConfig:
    del extra
    return RollbackConfig(serving_dir=args.serving_dir, version=args.version, tf_serving=tf_serving_from_args(args),
                          stale_claims_after=args.stale_claims_after)
