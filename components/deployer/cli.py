"""`shardflow deploy`: translates command-line flags into a DeployConfig. Nothing else.

    shardflow deploy --serving-dir s3://b/serving --inference-service digits --runtime-version 2.16.1 \
        [--namespace NS] [--canary-percent P] [--mode Standard|Knative] [--service-account SA] \
        [--cpu 1 --memory 2Gi --cpu-limit 2 --memory-limit 4Gi] [--kube-api http://127.0.0.1:8001]

Exit status: 0 when the InferenceService serves the pointer's version (and canary); 2 when a flag is bad, the
runtime is older than the training TensorFlow, or the cluster refuses the patch (nothing changed); 75 when
another push moved CURRENT.json meanwhile (deploy again); 1 when the cluster could not be reached.
"""
from __future__ import annotations

import argparse

from ..pusher.cli import tf_serving_from_args
from ..pusher.tf_serving import TfServing
from .config import ClusterTarget, DeployConfig
from .inference_service import MODES, STANDARD, Predictor


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of every command that reads the serving pointer and moves an InferenceService with it."""
    add = parser.add_argument
    add("--inference-service", default=ClusterTarget.name, metavar="NAME",
        help="the InferenceService's name (default %(default)s)")
    add("--namespace", default="", help="its namespace (default: the pod's own, else default)")
    add("--kube-api", default="", metavar="URL",
        help="the Kubernetes API without credentials, e.g. kubectl proxy's http://127.0.0.1:8001 (default: the "
             "pod's service account, else the kubeconfig)")


def add_pointer_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--serving-dir", required=True, help="where CURRENT.json and the versions live (path or URI)")
    add("--model-name", default=TfServing.name, help="the model's name in TF Serving's models.config, which follows "
                                                     "the pointer too (default %(default)s)")
    add("--serving-base-path", default="", metavar="PATH",
        help="the serving directory as TF Serving reads it, written into models.config (default: --serving-dir)")
    add_storage_base_argument(parser)


def add_storage_base_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kserve-storage-base", default="", metavar="URI",
                        help="the serving directory as KServe reads it, e.g. pvc://artifacts/serving for "
                             "/artifacts/serving on the claim `artifacts` (default: --serving-dir as it is)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_pointer_arguments(parser)
    add_cluster_arguments(parser)
    add = parser.add_argument
    add("--runtime-version", required=True, metavar="X.Y.Z",
        help="the TF Serving release KServe runs (runtimeVersion): at or above the training TensorFlow")
    add("--canary-percent", type=int, default=None, metavar="P",
        help="serve the pointer's version as a canary taking P %% (1-99) of the traffic, beside the version it "
             "replaced; shardflow promote makes it the served version, shardflow rollback drops it")
    add("--mode", default=STANDARD, choices=MODES,
        help="KServe's deployment mode of an InferenceService this creates (an existing one keeps its own)")
    add("--service-account", default="", help="the predictor's service account (the storage's credentials)")
    add("--output", default="", metavar="DIR", help="write deployed.json there: the versions served (a pipeline "
                                                    "step's output)")
    add("--pushed", default="", metavar="FILE", help="the Pusher's note of the version it pushed (a pipeline step's "
                                                     "input), recorded in deployed.json")
    for flag, default in (("cpu", "1"), ("memory", "2Gi"), ("cpu-limit", "2"), ("memory-limit", "4Gi")):
        add(f"--{flag}", default=default, help=f"the predictor's {flag.replace('-', ' ')} (default %(default)s)")


def target_from_args(args: argparse.Namespace) -> ClusterTarget:
    return ClusterTarget(name=args.inference_service, namespace=args.namespace, api_server=args.kube_api)


def config_from_args(args: argparse.Namespace, extra: list[str]) -> DeployConfig:
    del extra  # not a Beam command
    predictor = Predictor(runtime_version=args.runtime_version, cpu=args.cpu, memory=args.memory,
                          cpu_limit=args.cpu_limit, memory_limit=args.memory_limit,
                          service_account=args.service_account)
    return DeployConfig(serving_dir=args.serving_dir, target=target_from_args(args), predictor=predictor,
                        canary_percent=args.canary_percent, mode=args.mode, tf_serving=tf_serving_from_args(args),
                        storage_base=args.kserve_storage_base, output=args.output, pushed=args.pushed)
