"""`shardflow clean-serving`: translates command-line flags into a CleanServingConfig. Nothing else.

    shardflow clean-serving --serving-dir s3://b/serving [--stale-claims-after 3600]

Exit status: 0 when done; 2 on a bad flag; 1 when the store failed.
"""
from __future__ import annotations

import argparse

from .cli import add_serving_arguments, tf_serving_from_args
from .config import CleanServingConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_serving_arguments(parser)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> CleanServingConfig:
    del extra
    return CleanServingConfig(serving_dir=args.serving_dir, tf_serving=tf_serving_from_args(args),
                              stale_claims_after=args.stale_claims_after)
