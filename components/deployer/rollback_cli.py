"""`shardflow rollback`: the Pusher's flags, and with --inference-service the InferenceService that follows.

    shardflow rollback --serving-dir s3://b/serving --version 6 [--inference-service digits [--namespace NS]
        [--tracking-uri URI [--registered-model NAME] [--alias champion]]]

Exit status as the Pusher's rollback (pusher/rollback_cli.py); with --inference-service also 2 when it does not
exist, the cluster refuses the patch or the tracking server cannot be reached (nothing changed), 1 when the alias
could not follow (the version is not registered yet).
"""
from __future__ import annotations

import argparse

from ..pusher import rollback_cli
from ..pusher.clean_cli import add_registry_arguments
from .cli import add_storage_base_argument, target_from_args
from .promote_cli import ALIAS_HELP, TRACKING_HELP, registry_from_args
from .rollback import FollowedRollback


def add_arguments(parser: argparse.ArgumentParser) -> None:
    rollback_cli.add_arguments(parser)
    add = parser.add_argument
    add("--inference-service", default="", metavar="NAME",
        help="the KServe InferenceService that serves the directory: it serves version K too (default: none)")
    add("--namespace", default="", help="its namespace (default: the pod's own, else default)")
    add("--kube-api", default="", metavar="URL", help="the Kubernetes API without credentials (kubectl proxy's)")
    add_storage_base_argument(parser)
    add_registry_arguments(parser, f"with --inference-service: {TRACKING_HELP}", ALIAS_HELP)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> FollowedRollback:
    rollback = rollback_cli.config_from_args(args, extra)
    return FollowedRollback(rollback=rollback, target=target_from_args(args) if args.inference_service else None,
                            storage_base=args.kserve_storage_base, registry=registry_from_args(args))
