"""What each pipeline step does, on plain paths and lists: no kfp here, so it is testable alone.

The KFP components in `components.py` are thin: they take their artifacts' paths, call one function
here and copy the results into KFP artifacts. Each step runs a shardflow command through that
command's own CLI module (its parser and `main`, its row in shardflow.commands), so a pipeline option
string is exactly a CLI flag (`example_gen_options=["--resize", "28x28"]`,
`beam_args=["--runner=DataflowRunner", ...]`).
An output may be a local path or a remote URI (s3://, gs://); the commands take either.
A step's process (its container's KFP executor, or the local step worker) imports this module before
TensorFlow: importing it applies the process defaults (core/process_defaults.py), as the command does.

    step_bodies.example_gen(["train=/data/train.csv"], "/data", [], [], "/artifacts/examples")
"""
from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import time
from types import ModuleType
from typing import Any, Mapping, Sequence

from ..core.process_defaults import apply_process_defaults

apply_process_defaults()  # before the commands' modules, and TensorFlow, are imported

from ..commands import COMMANDS  # noqa: E402
from ..core import storage  # noqa: E402
from ..core.errors import ConfigError, ShardflowError  # noqa: E402
from ..core.flag_parser import FlagParser, check_extra, option_strings, refuse_unknown_flags  # noqa: E402
from ..core.pipeline_flags import exposed_flags  # noqa: E402
from ..core.hashing import sha256_of  # noqa: E402
from ..core.manifest import read_manifest  # noqa: E402
from ..example_gen.spans import has_span_pattern, pattern_matches  # noqa: E402
from ..evaluator.config import BLESSING, METRICS  # noqa: E402
from ..infra_validator.config import REPORT as INFRA_REPORT  # noqa: E402
from ..predict.config import MARKER as PREDICT_MARKER  # noqa: E402
from ..validation.report import HTML_NAME as REPORT_PAGE, JSON_NAME as ANOMALIES, MARKDOWN_NAME as REPORT_MARKDOWN  # noqa: E402,E501
from ..trainer.outputs import SUMMARY_NAME as TRAINING_SUMMARY  # noqa: E402
from ..pusher import PusherConfig, resolve_model_reference  # noqa: F401  (re-exported for the components)
from ..pusher import run as run_pusher  # noqa: E402
from ..trainer.hyperparameters import HYPERPARAMETERS_FILE, hyperparameters_record  # noqa: E402


NOT_PUSHED = "not pushed: "  # how a refused push's line begins (the run's summary finds its reason after it)


class StepFailed(ShardflowError):
    """A shardflow command of a step failed; the message is the command's own one line, the exit code its own."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def parse_step_argv(command: str, cli: ModuleType, argv: list[str], takes_beam_options: bool) -> tuple[Any, list[str]]:
    """The command's own parser on `argv`; `takes_beam_options`: Beam's own options pass through (as for
    example-gen and transform in shardflow.cli); any other unknown flag is an error naming it (the check
    shardflow.cli makes: core/flag_parser.check_extra)."""
    # A bad option fails the step with StepFailed naming it, not with argparse's SystemExit.
    parser = FlagParser(prog=f"shardflow {command}", error=lambda message: StepFailed(message, ConfigError.exit_code))
    cli.add_arguments(parser)
    known = option_strings(parser)
    try:
        try:
            args, extra = parser.parse_known_args(argv)
        except StepFailed:  # "--epochs or --steps is required" when the user wrote --epohcs: name the typo instead
            refuse_unknown_flags(command, argv, known, takes_beam_options)
            raise
        check_extra(command, extra, known, takes_beam_options)
    except ConfigError as err:
        raise StepFailed(f"shardflow {command}: error: {err}", err.exit_code) from None
    return args, extra


def _run_command(name: str, argv: list[str]) -> None:
    """`shardflow NAME ARGV` as the CLI runs it; a failure raises StepFailed with the command's own message
    and exit code (a command's main returns 0 or raises: nothing is read back from its output)."""
    command = COMMANDS[name]
    args, extra = parse_step_argv(name, command.cli, argv, command.passes_beam_options)
    try:
        command.main(args, extra)
    except ShardflowError as err:  # anything else is a bug: its traceback is the step's log
        raise StepFailed(f"shardflow {name}: error: {err}", err.exit_code) from err


def data_fingerprint(index: list[str], data_root: str) -> str:
    """SHA-256 over the index arguments and every index file's bytes: changes whenever a CSV does.

    A span pattern ({SPAN}, {YYYY}{MM}{DD}) covers every file it matches, so a new span changes it too.
    """
    digest = hashlib.sha256(json.dumps([sorted(index), data_root]).encode())
    for spec in sorted(index):
        pattern = spec.split("=", 1)[-1]
        paths = pattern_matches(pattern) if has_span_pattern(pattern) else [pattern]
        for path in paths:
            digest.update(f"{path}:{sha256_of(path)}".encode())
    return digest.hexdigest()


def command_argv(name: str, inputs: list[str], flags: Mapping[str, Any], options: Sequence[str],
                 beam_args: Sequence[str] = ()) -> list[str]:
    """`shardflow NAME`'s argv in a step: its inputs' and output's flags, its exposed flags' values (`flags`, by
    pipeline parameter: core/pipeline_flags.py), the step's options, and Beam's options for a Beam command."""
    command = COMMANDS[name]
    exposed = {flag.param: flag for flag in exposed_flags(command.cli.add_arguments)}
    argv = [*inputs, *(token for param, value in flags.items() for token in exposed[param].argv(value)), *options]
    return argv + (list(beam_args) if command.passes_beam_options else [])


def example_gen(index: list[str], data_root: str, flags: Mapping[str, Any], options: list[str], beam_args: list[str],
                output: str) -> dict:
    _run_command("example-gen", command_argv("example-gen", example_gen_inputs(index, data_root, output), flags,
                                             options, beam_args))
    manifest = read_manifest(output)
    return {"examples": {s: i.num_examples for s, i in manifest.splits.items()},
            "rejected": manifest.extra.get("rejected", 0),
            "rejected_by_reason": manifest.extra.get("rejected_by_reason", {})}


def validate(examples: str, output: str, flags: Mapping[str, Any], options: list[str]) -> dict:
    """Runs the data validation; raises (failing the step) on anomalies unless the flags say warn only."""
    # A window of spans is validated where its statistics are: the newest span, the data that is new.
    newest = read_manifest(examples).extra.get("newest_span")
    target = newest["dir"] if newest else examples
    _run_command("validate", command_argv("validate", ["--examples", target, "--output", output], flags, options))
    return storage.read_json(storage.join(output, ANOMALIES))


def copy_validation_report(workdir: str, markdown: str, page: str) -> None:
    """The validation's readable report (markdown, HTML) into the step's artifacts, when it was written."""
    if os.path.exists(os.path.join(workdir, REPORT_MARKDOWN)):
        shutil.copyfile(os.path.join(workdir, REPORT_MARKDOWN), markdown)
        shutil.copyfile(os.path.join(workdir, REPORT_PAGE), page)


def transform(examples: str, flags: Mapping[str, Any], options: list[str], beam_args: list[str], output: str) -> dict:
    _run_command("transform", command_argv("transform", ["--examples", examples, "--output", output], flags, options,
                                           beam_args))
    manifest = read_manifest(output)
    return {"examples": {s: i.num_examples for s, i in manifest.splits.items()}}


def tune(examples: str, flags: Mapping[str, Any], options: list[str], train_options: list[str], output: str) -> dict:
    """The search (`shardflow tune`) whose trials take the run's train options; without `options`, a record
    that no search ran (the Trainer then keeps its own options)."""
    if not options:
        record = hyperparameters_record({}, "", None, {"searched": False})
        storage.write_json(storage.join(output, HYPERPARAMETERS_FILE), record)
        return record
    _run_command("tune", command_argv("tune", tune_inputs(examples, options, train_options, output), flags, options))
    return storage.read_json(storage.join(output, HYPERPARAMETERS_FILE))


def train(examples: str, flags: Mapping[str, Any], options: list[str], warm_start: str, output: str,
          hyperparameters: str = "") -> dict:
    """`hyperparameters`: the tune step's output; its best values replace the options' when a search ran."""
    inputs = ["--examples", examples, "--output", output] + (["--warm-start", warm_start] if warm_start else [])
    best = storage.join(hyperparameters, HYPERPARAMETERS_FILE) if hyperparameters else ""
    if best and storage.read_json(best).get("values"):
        inputs += ["--hyperparameters", best]
    _run_command("train", command_argv("train", inputs, flags, options))
    return storage.read_json(storage.join(output, TRAINING_SUMMARY))  # `output` may be an s3:// or gs:// URI


def evaluate(model_dir: str, examples: str, baseline: str, flags: Mapping[str, Any], options: list[str],
             output: str) -> dict:
    inputs = ["--model", model_dir, "--examples", examples, "--output", output]
    _run_command("evaluate", command_argv("evaluate", inputs + (["--baseline", baseline] if baseline else []), flags,
                                          options))
    return {"metrics": storage.read_json(storage.join(output, METRICS)),
            "blessing": storage.read_json(storage.join(output, BLESSING))}


def example_gen_inputs(index: list[str], data_root: str, output: str) -> list[str]:
    return ["--data-root", data_root, "--output", output, *(token for spec in index for token in ("--index", spec))]


def tune_inputs(examples: str, options: list[str], train_options: list[str], output: str) -> list[str]:
    """The trials train as the run's Trainer does, less its budget (--epochs/--steps: tune's --trial-epochs)."""
    if "--train-args" in options:
        raise StepFailed("shardflow tune: error: the trials take the run's train options: drop --train-args "
                         "from the tune options", ConfigError.exit_code)
    trial, skip = [], False
    for token in train_options:
        if skip or token in ("--epochs", "--steps") or token.startswith(("--epochs=", "--steps=")):
            skip = token in ("--epochs", "--steps")
            continue
        trial.append(token)
    return ["--examples", examples, "--output", output, "--train-args", shlex.join(trial)]


def infra_validate(model_dir: str, evaluation: str, flags: Mapping[str, Any], options: list[str], output: str) -> dict:
    """`shardflow infra-validate`: the model loaded and called in a TensorFlow-only process; its report."""
    inputs = ["--model", model_dir, "--evaluation", evaluation, "--output", output]
    _run_command("infra-validate", command_argv("infra-validate", inputs, flags, options))
    return storage.read_json(storage.join(output, INFRA_REPORT))


def push(model_dir: str, evaluation: str, infra_validation: str, serving_dir: str, source: dict[str, Any]) -> str:
    """The Pusher (`shardflow push`'s run): copies the model, with the warm-up file, to `serving_dir/<N>/` and
    repoints CURRENT.json. The pipeline's conditions already held; the Pusher checks both verdicts again, and
    refuses (failing the step with its one line) when the served model is no longer the baseline the Evaluator
    gated against: another run pushed meanwhile (docs/push.md, "Concurrent runs")."""
    result = run_pusher(PusherConfig(model=model_dir, evaluation=evaluation, serving_dir=serving_dir,
                                     source=source, infra_validation=infra_validation))
    if not result.pushed:  # its exit status: 75 lost to another push (a rerun may push), 3 refused by a verdict
        raise StepFailed("shardflow push: " + NOT_PUSHED + "; ".join(result.reasons), result.exit_code)
    return result.location


def predict(model_dir: str, index: str, data_root: str, flags: Mapping[str, Any], options: list[str],
            beam_args: list[str], output: str) -> dict:
    """`shardflow predict` over a CSV index of new files with the model just pushed; its predict.json."""
    _run_command("predict", command_argv("predict", predict_inputs(model_dir, index, data_root, output), flags,
                                         options, beam_args))
    return storage.read_json(storage.join(output, PREDICT_MARKER))


def predict_inputs(model_dir: str, index: str, data_root: str, output: str) -> list[str]:
    return ["--model", model_dir, "--index", index, "--data-root", data_root, "--output", output]


def command_step(command: str, inputs: list[str], flags: Mapping[str, Any], options: list[str]) -> None:
    """A row-wired step (step_spec.py): `shardflow COMMAND` with its input and output flags (`inputs`:
    Step.consumed_argv), the step's exposed flags and options."""
    _run_command(command, command_argv(command, inputs, flags, options))


def record_outcome(record_dir: str, pipeline_job: str, state: str, failed_task: str, message: str) -> str:
    """One JSON file per run in `record_dir` (the exit handler's job), written atomically."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    path = storage.join(record_dir, f"run-{stamp}-{os.getpid()}.json")
    storage.write_json(path, {"pipeline_job": pipeline_job, "state": state, "failed_task": failed_task,
                             "message": message, "finished_at": stamp})
    return str(path)
