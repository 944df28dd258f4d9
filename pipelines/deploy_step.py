"""KServe's deploy as an optional step of the compiled pipeline, after Push: off by default (the default pipeline
and its golden IR are unchanged), on when this module is registered as a step:

    SHARDFLOW_STEPS=shardflow.pipelines.deploy_step shardflow compile --output pipeline.yaml --image IMAGE \
        --param 'deploy_options=["--serving-dir", "/artifacts/serving", "--runtime-version", "2.16.1",
                                 "--inference-service", "shardflow",
                                 "--kserve-storage-base", "pvc://artifacts/serving"]'

The step runs `shardflow deploy --pushed PUSHED --output OUT` with `deploy_options`, only when Push ran (inside its
conditions: the model was blessed and pushed), after it: the InferenceService then serves what CURRENT.json names
(with `--canary-percent`, the pushed version as a canary). Its pods need a token of a service account allowed to
patch the InferenceService (k8s/: `pipeline-runner`, `shardflow submit --service-account`). docs/kserve.md.
"""
from __future__ import annotations

from ..commands import COMMANDS
from .step_spec import Consumed, Resources, Step, StepOptions

STEP = Step("deploy", Resources("250m", "512Mi"), COMMANDS["deploy"],
            options=StepOptions("deploy_options", "--deploy-args",
                                "'--serving-dir /artifacts/serving --runtime-version 2.16.1' (KServe's "
                                "InferenceService follows the push: docs/kserve.md)"),
            consumes=(Consumed("--pushed", "push", "pushed"),), produces="deployed", light=True)
