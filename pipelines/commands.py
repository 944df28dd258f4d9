"""The pipeline's commands, registered with the `shardflow` command through the `shardflow.commands` entry point
(setup.py): shardflow.cli, the components' command layer, finds them there and never imports pipelines/.

Each row: (name, help, add_arguments, handler); none passes Beam's options through.
"""
from __future__ import annotations

from . import cli as pipeline_cli
from . import schedule as schedule_cli
from . import submit as submit_cli

PIPELINE_COMMANDS = (
    ("compile", "compile the pipeline to KFP v2 IR for a Kubeflow cluster",
     pipeline_cli.add_compile_arguments, pipeline_cli.compile_main),
    ("run", "run the whole pipeline on this machine (its compiled IR, steps in a warm worker)",
     pipeline_cli.add_run_arguments, pipeline_cli.run_main),
    ("schedule", "create or update a KFP recurring run of the pipeline (cron, UTC)",
     schedule_cli.add_schedule_arguments, schedule_cli.schedule_main),
    ("submit", "start one KFP run of the compiled pipeline (used by the k8s CronJob)",
     submit_cli.add_submit_arguments, submit_cli.submit_main),
)
