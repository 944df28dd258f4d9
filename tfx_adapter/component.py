"""`ImageExampleGen`: shardflow's ExampleGen as a TFX component (CSV indexes of images → Examples).

    from shardflow.tfx import ImageExampleGen
    example_gen = ImageExampleGen(index={"train": "data/train.csv", "eval": "data/eval.csv"},
                                  data_root="data", options=["--resize", "28x28"])
    statistics_gen = StatisticsGen(examples=example_gen.outputs["examples"])
"""
from __future__ import annotations

import os
from typing import Optional, Sequence, Union

from tfx import types
from tfx.dsl.components.base import base_beam_component, executor_spec
from tfx.types import standard_artifacts
from tfx.types.component_spec import ChannelParameter, ExecutionParameter

from .executor import EXAMPLES_KEY, Executor
from .options import Index, encode, example_gen_config, plain_index


class ImageExampleGenSpec(types.ComponentSpec):
    """JSON strings for `index` and `options`: they pass as they are through MLMD and the KFP IR."""

    PARAMETERS = {
        "index": ExecutionParameter(type=str),
        "data_root": ExecutionParameter(type=str),
        "options": ExecutionParameter(type=str, optional=True),
    }
    INPUTS: dict = {}
    OUTPUTS = {EXAMPLES_KEY: ChannelParameter(type=standard_artifacts.Examples)}


class ImageExampleGen(base_beam_component.BaseBeamComponent):
    """CSV indexes of image (and mask) files → a standard `Examples` artifact of tf.Examples.

    Args:
      index: `{split: csv_path}`, or one CSV path whose rows are split by hashing (`--split`,
        `--split-key` in `options`).
      data_root: the folder (or bucket prefix) the CSV's paths are relative to.
      options: flags of `shardflow example-gen` (e.g. `["--resize", "28x28", "--gzip"]`); Beam options
        also go through `with_beam_pipeline_args`.
    """

    SPEC_CLASS = ImageExampleGenSpec
    EXECUTOR_SPEC = executor_spec.BeamExecutorSpec(Executor)

    def __init__(self, index: Index, data_root: Union[str, "os.PathLike[str]"],
                 options: Optional[Sequence[str]] = None):
        options = list(options or [])
        # A mistake in the flags is reported here, when the pipeline is defined, not in the run.
        example_gen_config(index, data_root, options, output="<the Examples artifact>")
        spec = ImageExampleGenSpec(index=encode(plain_index(index)), data_root=os.fspath(data_root),
                                   options=encode(options),
                                   examples=types.Channel(type=standard_artifacts.Examples))
        super().__init__(spec=spec)
