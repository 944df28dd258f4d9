"""The pipeline's steps, one row each: what a step is, in one place. Everything else that lists steps
derives from `STEPS`:

- `make_components` / `Components` (components.py): the KFP component function named like the step
  (`infra-validate` → `infra_validate`), for every row;
- the resources, caching and retries of each task (pipeline.py's `place`);
- the up-front option check and the labels that name options in its errors (step_options.py:
  `check_step_options`, `RUN_FLAGS`, `PIPELINE_PARAMETERS`);
- the cacheable steps (`local_cache.CACHEABLE_STEPS`), the figure on each step's printed line
  (`step_log.key_figure`) and the outputs the run summary lists (`local_run.summarize`).

The wiring itself (which output feeds which input, the conditions) stays in pipeline.py's `_steps`,
and a command's flags in its own cli module (shardflow.commands). Nothing here imports kfp: the
option check runs before kfp is imported.

    BY_NAME["train"].resources.cpu        # "4"
    BY_NAME["train"].command.cli          # shardflow.trainer.cli
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

from ..commands import COMMANDS, Command
from . import step_figures as figures
from .step_bodies import (evaluate_argv, example_gen_argv, infra_validate_argv, predict_argv, train_argv,
                        transform_argv, tune_argv, validate_argv)


@dataclass(frozen=True)
class Resources:
    """CPU and memory, requested and limited alike; `accelerator`: the pipeline parameters giving its
    accelerator type and count, which also put the task on the GPU pool (node selectors, tolerations)."""

    cpu: str
    memory: str
    accelerator: tuple[str, str] | None = None


@dataclass(frozen=True)
class Labels:
    """How a step's options are named in an error: `shardflow run`'s flags, or the pipeline's parameters
    (`shardflow compile --param`)."""

    run: str
    pipeline: str


class Places(NamedTuple):
    """A step's locations in the up-front check: placeholders, never read (configs read files only in run())."""

    given: str  # the step's input artifact (examples, evaluation)
    output: str
    model: str


Argv = Callable[[Mapping[str, Any], Places], "list[str] | None"]


@dataclass(frozen=True)
class Step:
    """One task of the pipeline. `name`: the KFP task name; `argv`: the command's flags from the pipeline's
    parameters, for the up-front check (None: the run has no such step, e.g. no tune_options);
    `outputs`: (artifact, or a file in one, and the name the run summary lists it under);
    `takes_options_of`: another step whose options `argv` also takes, checked first so that a bad option
    is named by its own flag;
    `imports`: what the warm step worker imports for it once, before forking it (step_worker.py)."""

    name: str
    resources: Resources
    command: Command | None = None
    argv: Argv | None = None
    labels: Labels | None = None
    cacheable: bool = False  # KFP may reuse its outputs; `--no-cache STEP` names it
    retry: bool = False  # RETRY in pipeline.py: steps that read much data, where a node may go away
    figure: Callable[[dict], str] = figures.none
    outputs: tuple[tuple[str, str], ...] = ()
    takes_options_of: str = ""
    imports: tuple[str, ...] = ()  # the frameworks its command imports: a warm worker imports them before its fork

    @property
    def component(self) -> str:
        """The KFP component function's name in components.py (KFP names the task after it, with '-')."""
        return self.name.replace("-", "_")


def _example_gen(p: Mapping[str, Any], at: Places) -> list[str]:
    return example_gen_argv(p["index"], p["data_root"], p["example_gen_options"], p["beam_args"], at.output)


def _validate(p: Mapping[str, Any], at: Places) -> list[str]:
    return validate_argv(at.given, at.output, p["drift_threshold"], p["validation_warn_only"], p["validation_schema"],
                         p.get("validation_options", []))


def _transform(p: Mapping[str, Any], at: Places) -> list[str]:
    return transform_argv(at.given, p["transform_options"], p["beam_args"], at.output)


def _tune(p: Mapping[str, Any], at: Places) -> list[str] | None:
    return tune_argv(at.given, p["tune_options"], p["train_options"], at.output) if p.get("tune_options") else None


def _train(p: Mapping[str, Any], at: Places) -> list[str]:
    return train_argv(at.given, p["train_options"], at.output)


def _evaluate(p: Mapping[str, Any], at: Places) -> list[str]:
    return evaluate_argv(at.model, at.given, p["eval_thresholds"], p["max_regressions"],
                         p.get("regression_tolerance", "auto"), p["slice_by"], at.output, p.get("eval_gate", ""),
                         p.get("bootstrap_resamples"), p.get("bootstrap_seed"))


def _infra_validate(p: Mapping[str, Any], at: Places) -> list[str]:
    return infra_validate_argv(at.model, at.given, p.get("infra_validation_options", []), at.output)


def _predict(p: Mapping[str, Any], at: Places) -> list[str] | None:
    if not p.get("predict_index"):
        return None
    return predict_argv(at.model, p["predict_index"], p.get("predict_data_root") or p["data_root"],
                        p.get("predict_options", []), p["beam_args"], at.output)


# The index's options, named in errors about what the index says (read before any step).
INDEX_LABELS = Labels("--index/--example-gen-args", "index/example_gen_options")
_TRAINER_GPU = ("trainer_accelerator_type", "trainer_accelerator_limit")
# Imported by a warm worker once, when a step first needs them (seconds each; TFDV and TFT import TensorFlow).
_TF, _KERAS, _BEAM, _TFDV, _TFT = ("tensorflow", "tf_keras", "apache_beam", "tensorflow_data_validation",
                                   "tensorflow_transform")

# In the pipeline's order (the run summary lists the outputs in it).
STEPS: tuple[Step, ...] = (
    Step("fingerprint", Resources("500m", "1Gi"), figure=figures.fingerprint),  # never cached: it reads the CSVs
    Step("example-gen", Resources("2", "8Gi"), COMMANDS["example-gen"], _example_gen,
         Labels("--example-gen-args/--beam-args", "example_gen_options/beam_args"), cacheable=True, retry=True,
         figure=figures.examples, outputs=(("examples", "examples"),), imports=(_BEAM, _TFDV)),
    Step("validate", Resources("1", "4Gi"), COMMANDS["validate"], _validate,
         Labels("--drift-threshold/--validation-schema/--validate-args",
                "drift_threshold/validation_schema/validation_options"), cacheable=True,
         figure=figures.anomalies, outputs=(("report", "validation"),), imports=(_TFDV,)),
    Step("transform", Resources("2", "8Gi"), COMMANDS["transform"], _transform,
         Labels("--transform-args/--beam-args", "transform_options/beam_args"), cacheable=True, retry=True,
         figure=figures.transformed, outputs=(("transformed", "transformed"),), imports=(_BEAM, _TFT)),
    Step("tune", Resources("4", "16Gi", ("trainer_accelerator_type", "tuner_accelerator_limit")), COMMANDS["tune"],
         _tune, Labels("--tune-args", "tune_options"), cacheable=True, figure=figures.tuning,
         takes_options_of="train", imports=(_KERAS,)),
    Step("train", Resources("4", "16Gi", _TRAINER_GPU), COMMANDS["train"], _train,
         Labels("--train-args", "train_options"), cacheable=True, figure=figures.training,
         outputs=(("model", "model"),), imports=(_KERAS,)),
    # Never cached: the served baseline may have changed since.
    Step("evaluate", Resources("2", "8Gi", ("evaluator_accelerator_type", "evaluator_accelerator_limit")),
         COMMANDS["evaluate"], _evaluate,
         Labels("--threshold/--max-regression/--regression-tolerance/--slice-by/--gate/--bootstrap-resamples/"
                "--bootstrap-seed", "eval_thresholds/max_regressions/regression_tolerance/slice_by/eval_gate/"
                "bootstrap_resamples/bootstrap_seed"),
         figure=figures.evaluation, imports=(_TF,),
         # The eval split's likely label errors by CSV row (a file of the evaluation artifact).
         outputs=(("evaluation", "evaluation"), ("evaluation/label_issues.jsonl", "label_issues"))),
    # Cached: on one machine its key holds the canaries' bytes, not the Evaluator's new URI (local_cache.py).
    Step("infra-validate", Resources("2", "4Gi"), COMMANDS["infra-validate"], _infra_validate,
         Labels("--infra-validate-args", "infra_validation_options"), cacheable=True,
         figure=figures.serving_check, outputs=(("infra", "infra"),), imports=(_TF,)),
    Step("run-report", Resources("500m", "1Gi"), outputs=(("report", "report"),)),
    # Its inputs are artifacts only: nothing to check up front. It calls the Pusher's run() (step_bodies.push).
    Step("push", Resources("500m", "1Gi"), COMMANDS["push"], figure=figures.served, outputs=(("pushed", "pushed"),)),
    Step("predict", Resources("2", "8Gi"), COMMANDS["predict"], _predict,
         Labels("--predict-index/--predict-args/--beam-args", "predict_index/predict_options/beam_args"),
         figure=figures.predictions, outputs=(("predictions", "predictions"),), imports=(_BEAM, _TF)),
    Step("record-outcome", Resources("250m", "512Mi"), figure=figures.record),  # the exit handler's task
)
BY_NAME: dict[str, Step] = {step.name: step for step in STEPS}


def labels(kind: str) -> dict[str, str]:
    """Each checked step's label of `kind` ("run" or "pipeline") by step name, and the index's under "index"."""
    return {"index": getattr(INDEX_LABELS, kind),
            **{step.name: getattr(step.labels, kind) for step in STEPS if step.labels is not None}}


def checked_steps() -> list[Step]:
    """The steps the up-front check runs, in the table's order, except that a step taking another's options
    comes right after that one (tune after train: a bad --train-args is named as itself, not as --tune-args)."""
    position = {step.name: i for i, step in enumerate(STEPS)}
    return sorted((step for step in STEPS if step.argv is not None),
                  key=lambda step: (position[step.takes_options_of or step.name], bool(step.takes_options_of)))


def summary_outputs() -> dict[str, str]:
    """The run summary's outputs: its name → the artifact's path in a run directory (`step/artifact`)."""
    return {summary: f"{step.name}/{artifact}" for step in STEPS for artifact, summary in step.outputs}
