"""The pipeline's steps, one row each: what a step is, in one place. Everything else that lists steps
derives from `STEPS`:

- `make_components` / `Components` (components.py): the KFP component function named like the step
  (`infra-validate` → `infra_validate`), for every row;
- the resources, caching and retries of each task (pipeline.py's `place`);
- the up-front option check and the labels that name options in its errors (step_options.py:
  `check_step_options`, `RUN_FLAGS`, `PIPELINE_PARAMETERS`);
- the pipeline's per-step parameters, `shardflow run`'s per-step flags and LocalRunConfig's fields
  (step_parameters.py): each step's options parameter (`StepOptions`), and each flag its command marks
  with `expose` (core/pipeline_flags.py) as a parameter of its own;
- the cacheable steps (`local_cache.CACHEABLE_STEPS`), the figure on each step's printed line
  (`step_log.key_figure`) and the outputs the run summary lists (`local_run.summarize`).

The wiring itself (which output feeds which input, the conditions) stays in pipeline.py's `_wire_steps`,
and a command's flags in its own cli module (shardflow.commands). Nothing here imports kfp: the
option check runs before kfp is imported.

    BY_NAME["train"].resources.cpu        # "4"
    BY_NAME["train"].command.cli          # shardflow.trainer.cli
"""
from __future__ import annotations

import importlib
import importlib.metadata
import os
from typing import Any, Mapping

from ..commands import COMMANDS
from . import step_figures as figures
from .step_bodies import example_gen_inputs, predict_inputs, tune_inputs
from .step_spec import Consumed, Places, Resources, Step, StepOptions  # noqa: F401  (the row types, re-exported)


def _example_gen(p: Mapping[str, Any], at: Places) -> list[str]:
    return example_gen_inputs(p["index"], p["data_root"], at.output)


def _given(p: Mapping[str, Any], at: Places) -> list[str]:
    return ["--examples", at.given, "--output", at.output]


def _tune(p: Mapping[str, Any], at: Places) -> list[str] | None:
    return tune_inputs(at.given, p["tune_options"], p["train_options"], at.output) if p.get("tune_options") else None


def _evaluate(p: Mapping[str, Any], at: Places) -> list[str]:
    return ["--model", at.model, "--examples", at.given, "--output", at.output]


def _infra_validate(p: Mapping[str, Any], at: Places) -> list[str]:
    return ["--model", at.model, "--evaluation", at.given, "--output", at.output]


def _predict(p: Mapping[str, Any], at: Places) -> list[str] | None:
    if not p.get("predict_index"):
        return None
    return predict_inputs(at.model, p["predict_index"], p.get("predict_data_root") or p["data_root"], at.output)


# The index's options, named in errors about what the index says (read before any step).
INDEX_LABELS = {"run": "--index/--example-gen-args", "pipeline": "index/example_gen_options"}
_TRAINER_GPU = ("trainer_accelerator_type", "trainer_accelerator_limit")
# Imported by a warm worker once, when a step first needs them (seconds each; TFDV and TFT import TensorFlow).
_TF, _KERAS, _BEAM, _TFDV, _TFT = ("tensorflow", "tf_keras", "apache_beam", "tensorflow_data_validation",
                                   "tensorflow_transform")

# In the pipeline's order (the run summary lists the outputs in it).
STEPS: tuple[Step, ...] = (
    Step("fingerprint", Resources("500m", "1Gi"), figure=figures.fingerprint),  # never cached: it reads the CSVs
    Step("example-gen", Resources("2", "8Gi"), COMMANDS["example-gen"], _example_gen,
         StepOptions("example_gen_options", "--example-gen-args"), cacheable=True, retry=True,
         figure=figures.examples, outputs=(("examples", "examples"),), imports=(_BEAM, _TFDV)),
    Step("validate", Resources("1", "4Gi"), COMMANDS["validate"], _given,
         StepOptions("validation_options", "--validate-args", "'--no-drift site'"), cacheable=True,
         figure=figures.anomalies, outputs=(("report", "validation"),), imports=(_TFDV,)),
    Step("transform", Resources("2", "8Gi"), COMMANDS["transform"], _given,
         StepOptions("transform_options", "--transform-args"), cacheable=True, retry=True,
         figure=figures.transformed, outputs=(("transformed", "transformed"),), imports=(_BEAM, _TFT)),
    Step("tune", Resources("4", "16Gi", ("trainer_accelerator_type", "tuner_accelerator_limit")), COMMANDS["tune"],
         _tune, StepOptions("tune_options", "--tune-args", "'--max-trials 8 --space learning_rate=log:1e-4:1e-1' "
                            "(a search before training, whose trials take --train-args; none: no search)"),
         cacheable=True, figure=figures.tuning, takes_options_of="train", imports=(_KERAS,)),
    Step("train", Resources("4", "16Gi", _TRAINER_GPU), COMMANDS["train"], _given,
         StepOptions("train_options", "--train-args", "'--epochs 5 --batch-size 64'", ("--epochs", "10")),
         cacheable=True, figure=figures.training, outputs=(("model", "model"),), imports=(_KERAS,)),
    # Never cached: the served baseline may have changed since.
    Step("evaluate", Resources("2", "8Gi", ("evaluator_accelerator_type", "evaluator_accelerator_limit")),
         COMMANDS["evaluate"], _evaluate, StepOptions("evaluate_options", "--evaluate-args", "'--memory-mb 256'"),
         figure=figures.evaluation, imports=(_TF,),
         # The eval split's likely label errors by CSV row (a file of the evaluation artifact).
         outputs=(("evaluation", "evaluation"), ("evaluation/label_issues.jsonl", "label_issues"))),
    # Cached: on one machine its key holds the canaries' bytes, not the Evaluator's new URI (local_cache.py).
    Step("infra-validate", Resources("2", "4Gi"), COMMANDS["infra-validate"], _infra_validate,
         StepOptions("infra_validation_options", "--infra-validate-args", "'--batch-sizes 1,64 --tolerance 1e-3'"),
         cacheable=True, figure=figures.serving_check, outputs=(("infra", "infra"),), imports=(_TF,)),
    Step("run-report", Resources("500m", "1Gi"), outputs=(("report", "report"),)),
    # Its inputs are artifacts only: nothing to check up front. It calls the Pusher's run() (step_bodies.push).
    Step("push", Resources("500m", "1Gi"), COMMANDS["push"], figure=figures.served, outputs=(("pushed", "pushed"),)),
    Step("predict", Resources("2", "8Gi"), COMMANDS["predict"], _predict,
         StepOptions("predict_options", "--predict-args", "'--top-k 5 --format parquet'"),
         uses=(("--predict-index", "predict_index"),),
         figure=figures.predictions, outputs=(("predictions", "predictions"),), imports=(_BEAM, _TF)),
)
STEPS_ENV = "SHARDFLOW_STEPS"  # modules (comma-separated) whose STEP is one more step of the pipeline
STEP_GROUP = "shardflow.steps"  # the entry points an installed package registers its steps under


def registered_steps() -> tuple[Step, ...]:
    """Steps from outside the package, wired from their rows alone (`consumes`, `produces`): each module named
    in $SHARDFLOW_STEPS, then each `shardflow.steps` entry point. Every process that builds or runs the
    pipeline reads them at import (the step worker and a step's container inherit the environment); each
    one's command is registered beside the components' (shardflow.commands.COMMANDS)."""
    names = [name.strip() for name in os.environ.get(STEPS_ENV, "").split(",") if name.strip()]
    found = [importlib.import_module(name).STEP for name in names]
    found += [entry.load() for entry in importlib.metadata.entry_points(group=STEP_GROUP)]
    for step in found:
        COMMANDS.setdefault(step.command.name, step.command)
    return tuple(found)


# The exit handler's task last: the run summary lists outputs in the table's order.
STEPS += (*registered_steps(), Step("record-outcome", Resources("250m", "512Mi"), figure=figures.record))
BY_NAME: dict[str, Step] = {step.name: step for step in STEPS}


def labels(kind: str) -> dict[str, str]:
    """Each checked step's label of `kind` ("run" or "pipeline") by step name, and the index's under "index"."""
    return {"index": INDEX_LABELS[kind], **{step.name: step.label(kind) for step in STEPS if step.options}}


def checked_steps() -> list[Step]:
    """The steps the up-front check runs, in the table's order, except that a step taking another's options
    comes right after that one (tune after train: a bad --train-args is named as itself, not as --tune-args)."""
    position = {step.name: i for i, step in enumerate(STEPS)}
    return sorted((step for step in STEPS if step.inputs is not None or step.consumes),
                  key=lambda step: (position[step.takes_options_of or step.name], bool(step.takes_options_of)))


def summary_outputs() -> dict[str, str]:
    """The run summary's outputs: its name → the artifact's path in a run directory (`step/artifact`)."""
    listed = [(step, artifact, summary) for step in STEPS for artifact, summary in step.outputs]
    listed += [(step, "output", step.produces) for step in STEPS if step.consumes]  # command_step's one output
    return {summary: f"{step.name}/{artifact}" for step, artifact, summary in listed}
