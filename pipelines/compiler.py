"""`shardflow compile`: the pipeline as KFP v2 IR (YAML) for a Kubeflow cluster.

    compile_pipeline("pipeline.yaml", "registry.example.com/ml/shardflow@sha256:...",
                     cluster_options(mount_pvc=["data=/data"]), {"data_root": "/data"})

`params` bakes defaults for pipeline parameters into the IR (text converted to each parameter's
type), so a run of the package needs only the ones left without a default. They are checked as
`shardflow run` checks its flags (run_target.check_baked_params): the step options always; the
thresholds against the kind of the index's target, and that kind's default threshold, when the baked index is
readable here.
"""
from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from google.protobuf import json_format

from ..core import storage
from .cluster_options import ClusterOptions, check_image
from .kfp_sdk import compiler
from .params import declared_parameters, typed_params
from .pipeline import build_pipeline
from .run_target import check_baked_params


def compile_pipeline(path: str | Path, image: str, cluster: ClusterOptions = ClusterOptions(),
                     params: Mapping[str, str] | None = None, no_cache: frozenset = frozenset(),
                     allow_mutable_image: bool = False) -> str:
    """Writes the compiled pipeline to `path` (a local path or a URI) whole or not at all; returns it.

    `no_cache`: steps compiled with KFP's caching off (local_cache.CACHEABLE_STEPS), or {"all"}.
    `allow_mutable_image`: accept an image by tag (check_image).
    """
    pipeline = build_pipeline(check_image(image, allow_mutable_image), cluster, no_cache)
    spec = json_format.MessageToDict(pipeline.pipeline_spec)
    defaults = check_baked_params(declared_parameters(spec), typed_params(spec, params or {}, require_all=False))
    with tempfile.TemporaryDirectory(prefix="shardflow-compile-") as scratch:  # kfp writes to a local file
        compiled = os.path.join(scratch, "pipeline.yaml")
        compiler.Compiler().compile(pipeline, compiled, pipeline_parameters=defaults)
        with open(compiled, "rb") as source:
            storage.write_bytes(str(path), source.read())
    return str(path)
