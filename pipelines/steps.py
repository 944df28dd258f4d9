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
from typing import Any, Collection, Mapping

from ..commands import COMMANDS
from ..core.beam_options import local_pool_workers
from . import step_figures as figures
from .step_bodies import example_gen_inputs, predict_inputs, tune_inputs
from .step_spec import Consumed, Places, Resources, Standby, Step, StepOptions  # noqa: F401  (row types, re-exported)


def _example_gen(p: Mapping[str, Any], at: Places) -> list[str]:
    return example_gen_inputs(p["index"], p["data_root"], at.output)


def _given(p: Mapping[str, Any], at: Places) -> list[str]:
    return ["--examples", at.given, "--output", at.output]


def _tune(p: Mapping[str, Any], at: Places) -> list[str] | None:
    return tune_inputs(at.given, p["tune_options"], p["train_options"], at.output) if p.get("tune_options") else None


def _evaluate(p: Mapping[str, Any], at: Places) -> list[str]:
    return ["--model", at.model, "--examples", at.given, "--output", at.output]


def _example_gen_light(arguments: Mapping[str, Any]) -> bool:
    """Without Beam's runner flags ExampleGen encodes on its own process pool and computes statistics in a process
    of its own (example_gen/statistics_process.py): its step imports no framework. Forked from the worker with
    TensorFlow, Beam and TFDV (warm, 3 epochs of the digits) it took 12.3 s, 4.3 s as its own process."""
    flags = list(arguments.get("beam_args") or []) + list(arguments.get("options") or [])  # either may hold them
    return local_pool_workers(flags, 1) is not None


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
# The Trainer's curves and the Evaluator's pages are drawn with it: 0.6 s of import otherwise in each step's own time.
_PLOT = "matplotlib.pyplot"

# In the pipeline's order (the run summary lists the outputs in it).
STEPS: tuple[Step, ...] = (
    Step("fingerprint", Resources("500m", "1Gi"), figure=figures.fingerprint, light=True),  # never cached: reads CSVs
    Step("example-gen", Resources("2", "8Gi"), COMMANDS["example-gen"], _example_gen,
         StepOptions("example_gen_options", "--example-gen-args"), cacheable=True, retry=True,
         figure=figures.examples, outputs=(("examples", "examples"),), imports=(_BEAM, _TFDV),
         light=_example_gen_light),
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
         cacheable=True, figure=figures.training, outputs=(("model", "model"),), imports=(_KERAS, _PLOT)),
    # Not cached by KFP, whose key would hold the word `latest`, not the model served now; `shardflow run` caches it
    # keyed by the served model (local_cache.RESOLVED): a push by another run is a miss.
    Step("evaluate", Resources("2", "8Gi", ("evaluator_accelerator_type", "evaluator_accelerator_limit")),
         COMMANDS["evaluate"], _evaluate, StepOptions("evaluate_options", "--evaluate-args", "'--memory-mb 128'"),
         figure=figures.evaluation, imports=(_TF, _PLOT),
         # The eval split's likely label errors by CSV row (a file of the evaluation artifact).
         outputs=(("evaluation", "evaluation"), ("evaluation/label_issues.jsonl", "label_issues"))),
    # Cached: on one machine its key holds the canaries' bytes, not the Evaluator's new URI (local_cache.py).
    # Its TensorFlow-only probe is started ahead in a run where example-gen or train ran: either means a new
    # model, which is what it probes. Started with train, its import slowed training by ~3 s on 2 cores; with
    # example-gen, ~2 s less in all, but it then held ~600 MB (RSS; 360 MB PSS) through training, the run's
    # peak: 2,604 MB of RSS in the process tree against the script's 1,341 on 1,000 photos. It starts with
    # evaluate: its import overlaps the evaluation.
    Step("infra-validate", Resources("2", "4Gi"), COMMANDS["infra-validate"], _infra_validate,
         StepOptions("infra_validation_options", "--infra-validate-args", "'--batch-sizes 1,64 --tolerance 1e-3'"),
         cacheable=True, figure=figures.serving_check, outputs=(("infra", "infra"),), imports=(_TF,),
         standby=Standby("shardflow.infra_validator.probe_process:start_standby", ("example-gen", "train"),
                         at="evaluate")),
    Step("run-report", Resources("500m", "1Gi"), outputs=(("report", "report"),), light=True),
    # Its inputs are artifacts only: nothing to check up front. It calls the Pusher's run() (step_bodies.push).
    Step("push", Resources("500m", "1Gi"), COMMANDS["push"], figure=figures.served, outputs=(("pushed", "pushed"),),
         light=True),
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
STEPS += (*registered_steps(), Step("record-outcome", Resources("250m", "512Mi"), figure=figures.record, light=True))
BY_NAME: dict[str, Step] = {step.name: step for step in STEPS}
for _step in STEPS:  # a standby is started in the worker whose forks inherit it: the one with TensorFlow
    if _step.standby and (_step.light or not all(name in BY_NAME for name in (*_step.standby.when,
                                                                              _step.standby.at or _step.name))):
        raise ValueError(f"step {_step.name}: a standby is for a step of the worker with TensorFlow (not light), "
                         f"started when steps of the table run, not {_step.standby.when}")


def standbys_started_by(task: str, ran: Collection[str] = ()) -> list[str]:
    """What the warm worker starts ahead when `task` runs (`Step.standby`), as `module:function`; `ran`: the tasks
    this run ran before (not taken from the cache)."""
    return [step.standby.start for step in STEPS if step.standby and (
        task in step.standby.when if not step.standby.at else task == step.standby.at and set(ran) & set(step.standby.when))]


def imports_ahead_of(task: str) -> list[str]:
    """What the worker with TensorFlow imports while a cacheable `task` runs (it ran: the cacheable steps after it
    get new inputs and run too): their `imports`, in the table's order; none after a step that always runs."""
    names = [step.name for step in STEPS]
    if task not in BY_NAME or not BY_NAME[task].cacheable:
        return []
    later = STEPS[names.index(task) + 1:]
    return list(dict.fromkeys(module for step in later if step.cacheable for module in step.imports))


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
