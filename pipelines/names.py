"""Names the pipeline's modules share, in a leaf module of pipelines/ (pipeline.py, the wiring, imports nothing
of the core): the pipeline's name is the run output's (core/run_layout.py), whose run folders start with it."""
from __future__ import annotations

from ..core.run_layout import PIPELINE_NAME

__all__ = ["PIPELINE_NAME"]  # the compiled pipeline's pipelineInfo.name
