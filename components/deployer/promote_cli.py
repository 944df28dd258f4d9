"""`shardflow promote`: translates command-line flags into a PromoteConfig. Nothing else.

    shardflow promote --serving-dir s3://b/serving --inference-service digits [--namespace NS] \
        [--tracking-uri URI [--registered-model NAME] [--alias champion]]

Exit status: 0 when the canary is the served version; 2 when there is no canary, the InferenceService does not
exist, the cluster refuses the patch or the tracking server cannot be reached (nothing changed); 75 when another
push moved CURRENT.json meanwhile; 1 when the alias could not follow (the version is not registered yet).
"""
from __future__ import annotations

import argparse

from ..pusher.clean_cli import add_registry_arguments, registered_model_from_args
from ..pusher.cli import tf_serving_from_args
from .cli import add_cluster_arguments, add_pointer_arguments, target_from_args
from .config import PromoteConfig, RegistryAlias

TRACKING_HELP = "the MLflow registry whose alias moves with the pointer (unset: at the next shardflow track)"
ALIAS_HELP = "the registry alias on the version served"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pointer_arguments(parser)
    add_cluster_arguments(parser)
    add_registry_arguments(parser, TRACKING_HELP, ALIAS_HELP)


def registry_from_args(args: argparse.Namespace) -> RegistryAlias:
    return RegistryAlias(tracking_uri=args.tracking_uri, registered_model=registered_model_from_args(args),
                         alias=args.alias)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> PromoteConfig:
    del extra
    return PromoteConfig(serving_dir=args.serving_dir, target=target_from_args(args),
                         tf_serving=tf_serving_from_args(args), storage_base=args.kserve_storage_base,
                         registry=registry_from_args(args))
