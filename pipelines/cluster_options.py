"""Where the pipeline's pods run: the image, PVCs on every step, GPU node pools for the Tuner, Trainer and Evaluator.

Parsed and checked here, without kfp (so a bad flag fails in milliseconds); pipeline.py applies them
with kfp-kubernetes. Every refusal names the flag and the value.

    options = cluster_options(mount_pvc=["data=/data"], node_selector=["pool=gpu"],
                              toleration=["nvidia.com/gpu:NoSchedule"])
    options.pvc_mounts  # (PvcMount(claim="data", path="/data"),)
"""
from __future__ import annotations

import argparse
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import ConfigError

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_ZERO_DIGEST = "@sha256:" + "0" * 64  # the k8s/ manifests' placeholder: never a built image
_BY_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


@dataclass(frozen=True)
class PvcMount:
    claim: str
    path: str


@dataclass(frozen=True)
class Toleration:
    key: str
    value: str | None  # None: any value of the key (operator Exists); else operator Equal
    effect: str


@dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    pvc_mounts: tuple[PvcMount, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()  # (label key, value) for the accelerated steps
    tolerations: tuple[Toleration, ...] = ()  # for the accelerated steps
    # Environment of every step: the MLflow tracking server (MLFLOW_TRACKING_URI), for a cluster whose KFP does not
    # set it itself; KFP's MLflow integration gives each task its run (MLFLOW_RUN_ID): step_tracking.py.
    env: tuple[tuple[str, str], ...] = ()

    def is_empty(self) -> bool:
        return not (self.pvc_mounts or self.node_selector or self.tolerations)


def check_image(image: str, allow_mutable: bool = False) -> str:
    """The component image: a reference, never the placeholder digest of k8s/base; by digest unless
    `allow_mutable` (a tag can name another image tomorrow, and a scheduled run would change with it).

    >>> check_image("registry.example.com/shardflow@sha256:" + "ab" * 32)[-8:]
    'abababab'
    >>> check_image("shardflow:latest", allow_mutable=True)
    'shardflow:latest'
    """
    if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image):
        raise ConfigError(f"--image {image!r}: expected an image reference such as REGISTRY/shardflow@sha256:DIGEST")
    if image.endswith(_ZERO_DIGEST):
        raise ConfigError(f"--image {image!r}: the all-zero digest is the k8s/ placeholder, not a built image")
    if not allow_mutable and not _BY_DIGEST.search(image):
        raise ConfigError(f"--image {image!r}: a tag is mutable; give the image by digest "
                          "(REGISTRY/shardflow@sha256:DIGEST), or pass --allow-mutable-image")
    return image


def cluster_options(mount_pvc: Sequence[str] = (), node_selector: Sequence[str] = (),
                    toleration: Sequence[str] = (), tracking_uri: str | None = None) -> ClusterOptions:
    """The flags' values (CLAIM=PATH, KEY=VALUE, KEY[=VALUE]:EFFECT, a tracking URI) as checked options."""
    mounts: dict[str, tuple[str, PvcMount]] = {}  # normalized path -> (the flag value, its mount)
    for text in mount_pvc:
        mount = _pvc_mount(text)
        if mount.path in mounts:
            raise ConfigError(f"--mount-pvc {text!r}: {mount.path} is already mounted by {mounts[mount.path][0]!r}")
        mounts[mount.path] = (text, mount)
    selector: dict[str, str] = {}
    for text in node_selector:
        key, sep, value = text.partition("=")
        if not sep:
            raise ConfigError(f"--node-selector {text!r}: expected KEY=VALUE, "
                              "e.g. cloud.google.com/gke-accelerator=nvidia-l4")
        _check_label("--node-selector", text, key, value)
        if key in selector:
            raise ConfigError(f"--node-selector {text!r}: {key} is already selected (={selector[key]!r})")
        selector[key] = value
    tolerations = [_toleration(text) for text in toleration]
    for index, item in enumerate(tolerations):
        if item in tolerations[:index]:
            raise ConfigError(f"--toleration {toleration[index]!r} is given twice")
    if tracking_uri is not None and not re.match(r"^(https?|databricks|file)://?\S+$|^databricks$", tracking_uri):
        raise ConfigError(f"--tracking-uri {tracking_uri!r}: expected http(s)://HOST[:PORT] (the MLflow server "
                          "the pods reach)")
    env = (("MLFLOW_TRACKING_URI", tracking_uri),) if tracking_uri else ()
    return ClusterOptions(pvc_mounts=tuple(mount for _, mount in mounts.values()), node_selector=tuple(selector.items()),
                          tolerations=tuple(tolerations), env=env)


def _pvc_mount(text: str) -> PvcMount:
    claim, sep, path = text.partition("=")
    if not sep:
        raise ConfigError(f"--mount-pvc {text!r}: expected CLAIM=PATH, e.g. data=/data")
    if not claim:
        raise ConfigError(f"--mount-pvc {text!r}: the claim name is empty")
    if len(claim) > 253 or not _DNS_SUBDOMAIN.match(claim):
        raise ConfigError(f"--mount-pvc {text!r}: {claim!r} is not a valid PVC name (DNS-1123: lowercase letters, "
                          "digits, '-' and '.', starting and ending with a letter or digit)")
    if not path.startswith("/"):
        raise ConfigError(f"--mount-pvc {text!r}: the mount path {path!r} is not absolute")
    path = posixpath.normpath(path)  # "/data/" and "/data" are one mount point
    if path == "/":
        raise ConfigError(f"--mount-pvc {text!r}: a volume cannot be mounted over the root directory")
    return PvcMount(claim, path)


def _toleration(text: str) -> Toleration:
    spec, sep, effect = text.rpartition(":")  # label keys and values hold no ':', so the last one splits
    if not sep:
        raise ConfigError(f"--toleration {text!r}: expected KEY[=VALUE]:EFFECT, e.g. nvidia.com/gpu:NoSchedule")
    if effect not in TAINT_EFFECTS:
        raise ConfigError(f"--toleration {text!r}: effect {effect!r} is not one of {', '.join(TAINT_EFFECTS)}")
    key, eq, value = spec.partition("=")
    _check_label("--toleration", text, key, value)
    return Toleration(key, value if eq else None, effect)


def _check_label(flag: str, text: str, key: str, value: str) -> None:
    """A Kubernetes label key ([DNS-1123 prefix/]name) and value, as node labels and taints use."""
    prefix, slash, name = key.rpartition("/")
    if not key or (slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix))) \
            or len(name) > 63 or not _LABEL_NAME.match(name):
        raise ConfigError(f"{flag} {text!r}: {key!r} is not a valid label key ([DNS-1123 prefix/]name, "
                          "name: at most 63 letters, digits, '-', '_', '.')")
    if len(value) > 63 or (value and not _LABEL_NAME.match(value)):
        raise ConfigError(f"{flag} {text!r}: {value!r} is not a valid label value "
                          "(at most 63 letters, digits, '-', '_', '.', starting and ending with a letter or digit)")


def add_cluster_arguments(parser: argparse.ArgumentParser) -> None:
    add = parser.add_argument
    add("--allow-mutable-image", action="store_true",
        help="accept --image by tag (e.g. shardflow:0.1.0) instead of by digest")
    add("--mount-pvc", action="append", default=[], metavar="CLAIM=PATH",
        help="mount this PersistentVolumeClaim at PATH on every step; repeatable")
    add("--node-selector", action="append", default=[], metavar="KEY=VALUE",
        help="node label the Tuner, Trainer and Evaluator pods require (a GPU node pool); repeatable")
    add("--toleration", action="append", default=[], metavar="KEY[=VALUE]:EFFECT",
        help=f"taint the Tuner, Trainer and Evaluator pods tolerate; EFFECT: {', '.join(TAINT_EFFECTS)}; repeatable")
    add("--tracking-uri", default=None, metavar="URI",
        help="MLFLOW_TRACKING_URI on every step: with KFP's MLflow integration (MLFLOW_RUN_ID), each step logs "
             "into its task's run (docs/tracking.md)")


def cluster_options_from_args(args: argparse.Namespace) -> ClusterOptions:
    return cluster_options(args.mount_pvc, args.node_selector, args.toleration, args.tracking_uri)
