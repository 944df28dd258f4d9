"""What a pipeline step is: the row type of the step table (steps.py), also for a step registered from outside
the package (steps.py's `SHARDFLOW_STEPS` and `shardflow.steps` entry points): a row with `consumes` and
`produces` needs no code of its own in pipelines/: the generic KFP component (components.command_step),
its body (step_bodies.command_step) and its wiring (pipeline._wire_row_steps) come from the row.

    Step("model-card", Resources("500m", "1Gi"), Command("model-card", "...", model_card_cli),
         options=StepOptions("model_card_options", "--model-card-args"),
         consumes=(Consumed("--model", "train", "model"), Consumed("--evaluation", "evaluate", "evaluation")),
         produces="card")
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple

from ..commands import Command
from ..core.pipeline_flags import ExposedFlag, exposed_flags
from . import step_figures as figures
from .step_bodies import command_argv


MAX_CONSUMED = 3  # the input slots of the generic KFP component (components.command_step)


@dataclass(frozen=True)
class Consumed:
    """An artifact a row-wired step takes: its command's `flag`, and the `step` and `artifact` producing it."""

    flag: str
    step: str
    artifact: str


@dataclass(frozen=True)
class Resources:
    """CPU and memory, requested and limited alike; `accelerator`: the pipeline parameters giving its
    accelerator type and count, which also put the task on the GPU pool (node selectors, tolerations)."""

    cpu: str
    memory: str
    accelerator: tuple[str, str] | None = None


@dataclass(frozen=True)
class StepOptions:
    """The step's one options parameter: any of its command's flags, as one string in `shardflow run`
    (`run_flag`, e.g. --evaluate-args) and as a list in the pipeline (`param`, e.g. evaluate_options)."""

    param: str
    run_flag: str
    example: str = ""  # shown in the run flag's help
    default: tuple[str, ...] = ()


class Standby(NamedTuple):
    """A process a step hands its work to, started ahead by the warm step worker: `start` (`module:function`,
    run in the worker, so the steps it forks later inherit what it starts) in a run where a task of `when` ran:
    the steps whose run makes this step's run certain (a new model is what infra-validate probes). Not on a
    rerun whose steps are cached: the standby would only compete for the CPU. It starts when the task `at`
    runs ("": when the `when` task runs), so it holds its memory only from then on."""

    start: str
    when: tuple[str, ...]
    at: str = ""


class Places(NamedTuple):
    """A step's locations in the up-front check: placeholders, never read (configs read files only in run())."""

    given: str  # the step's input artifact (examples, evaluation)
    output: str
    model: str


# The command's flags for the step's inputs and output, from the pipeline's parameters (for the up-front check;
# the component passes the same through step_bodies); None: the run has no such step (no tune options, ...).
Inputs = Callable[[Mapping[str, Any], Places], "list[str] | None"]


@dataclass(frozen=True)
class Step:
    """One task of the pipeline. `name`: the KFP task name; `inputs`: its command's input and output flags;
    `options`: the parameter taking any other flag of its command; `uses`: the other pipeline parameters its
    errors name (run flag, parameter);
    `outputs`: (artifact, or a file in one, and the name the run summary lists it under);
    `takes_options_of`: another step whose options `inputs` also takes, checked first so that a bad option
    is named by its own flag;
    `imports`: what the warm step worker imports for it once, before forking it (step_worker.py); `light`:
    it imports nothing heavy, so the light worker runs it; `standby`: what the worker starts ahead for it.
    Its command's flags marked with `expose` (core/pipeline_flags.py) are pipeline parameters of their own."""

    name: str
    resources: Resources
    command: Command | None = None
    inputs: Inputs | None = None
    options: StepOptions | None = None
    uses: tuple[tuple[str, str], ...] = ()
    cacheable: bool = False  # KFP may reuse its outputs; `--no-cache STEP` names it
    retry: bool = False  # RETRY in pipeline.py: steps that read much data, where a node may go away
    figure: Callable[[dict], str] = figures.none
    outputs: tuple[tuple[str, str], ...] = ()
    takes_options_of: str = ""
    imports: tuple[str, ...] = ()  # the frameworks its command imports: a warm worker imports them before its fork
    # Imports no framework: runs in the light warm worker, which never waits for TensorFlow's import (local_run.py);
    # a function of the task's arguments when that depends on them (ExampleGen: not on a Beam runner).
    light: bool | Callable[[Mapping[str, Any]], bool] = False
    standby: Standby | None = None  # a process of its own, started ahead while another step runs
    # A step wired from its row alone (no code of its own in components.py, step_bodies.py or pipeline.py): the
    # artifacts it takes, each as a flag of its command, and the name of the one it produces (its --output).
    consumes: tuple[Consumed, ...] = ()
    produces: str = ""

    @property
    def component(self) -> str:
        """The KFP component function's name in components.py (KFP names the task after it, with '-')."""
        return self.name.replace("-", "_")

    @property
    def exposed(self) -> tuple[ExposedFlag, ...]:
        """Its command's flags that are pipeline parameters of their own."""
        return exposed_flags(self.command.cli.add_arguments) if self.options else ()

    def flag_values(self, p: Mapping[str, Any]) -> dict[str, Any]:
        """The exposed flags' values among the pipeline's parameters `p`, by parameter name."""
        return {flag.param: p[flag.param] for flag in self.exposed if p.get(flag.param) is not None}

    def argv(self, p: Mapping[str, Any], at: Places) -> list[str] | None:
        """The command's whole argv from the pipeline's parameters (the up-front check's)."""
        given = self.inputs(p, at) if self.inputs else self.consumed_argv(at.given, at.output) if self.consumes \
            else None
        if given is None:
            return None
        return command_argv(self.command.name, given, self.flag_values(p), p.get(self.options.param, ()),
                            p.get("beam_args", ()))

    def __post_init__(self) -> None:
        if len(self.consumes) > MAX_CONSUMED or bool(self.consumes) != bool(self.produces):
            raise ValueError(f"step {self.name}: a row-wired step consumes 1 to {MAX_CONSUMED} artifacts and "
                             "names the one it produces")

    def consumed_argv(self, given: str | list[str], output: str) -> list[str]:
        """A row-wired step's input and output flags: each consumed artifact's path (`given`: one for all, in
        the up-front check), then --output."""
        paths = [given] * len(self.consumes) if isinstance(given, str) else given
        return [token for consumed, path in zip(self.consumes, paths) for token in (consumed.flag, path)] + \
            ["--output", output]

    def runs_light(self, arguments: Mapping[str, Any]) -> bool:
        """Whether the task, with these arguments, runs in the light worker (and is sent no `imports`)."""
        return bool(self.light(arguments) if callable(self.light) else self.light)

    def label(self, kind: str) -> str:
        """How its options are named in an error: `shardflow run`'s flags ("run"), or the pipeline's parameters."""
        names = [(f.run_flag, f.param) for f in self.exposed] + list(self.uses)
        names += [(self.options.run_flag, self.options.param)]
        names += [("--beam-args", "beam_args")] if self.command.passes_beam_options else []
        return "/".join(run if kind == "run" else param for run, param in names)
