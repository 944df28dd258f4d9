"""`shardflow compile`: the pipeline as KFP v2 IR (YAML) for a Kubeflow cluster.

    compile_pipeline("pipeline.yaml", image="registry.example.com/shardflow@sha256:...")
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from kfp import compiler

from .cli import DEFAULT_IMAGE
from .pipeline import build_pipeline


def compile_pipeline(path: str | Path, image: str = DEFAULT_IMAGE) -> Path:
    """Writes the compiled pipeline to `path` atomically and returns it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".yaml", dir=path.parent)
    os.close(descriptor)
    try:
        compiler.Compiler().compile(build_pipeline(image), temp)
        os.replace(temp, path)
    finally:
        if os.path.exists(temp):
            os.unlink(temp)
    return path
