"""Names the pipeline's modules share, in a leaf module that imports nothing (no import cycles)."""
from __future__ import annotations

PIPELINE_NAME = "shardflow"  # the compiled pipeline's pipelineInfo.name
