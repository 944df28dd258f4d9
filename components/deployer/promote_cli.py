"""`shardflow promote`: translates command-line flags into a PromoteConfig. Nothing else.

    shardflow promote --serving-dir s3://b/serving --inference-service digits [--namespace NS]

Exit status: 0 when the canary is the served version; 2 when there is no canary, the InferenceService does not
exist or the cluster refuses the patch (nothing changed); 75 when another push moved CURRENT.json meanwhile.
"""
from __future__ import annotations

import argparse

from ..pusher.cli import tf_serving_from_args
from .cli import add_cluster_arguments, add_pointer_arguments, target_from_args
from .config import PromoteConfig


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pointer_arguments(parser)
    add_cluster_arguments(parser)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> PromoteConfig:
    del extra
    return PromoteConfig(serving_dir=args.serving_dir, target=target_from_args(args),
                         tf_serving=tf_serving_from_args(args), storage_base=args.kserve_storage_base)
