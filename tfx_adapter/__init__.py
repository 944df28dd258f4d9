"""shardflow inside TFX pipelines (needs tfx: `make tfx-setup` builds that environment, .venv-tfx).

    from shardflow.tfx import ImageExampleGen
    example_gen = ImageExampleGen(index={"train": "d/train.csv", "eval": "d/eval.csv"}, data_root="d")
"""
from .component import ImageExampleGen, ImageExampleGenSpec
from .executor import Executor

__all__ = ["Executor", "ImageExampleGen", "ImageExampleGenSpec"]
