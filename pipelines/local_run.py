"""`shardflow run`: the compiled Kubeflow pipeline executed on this machine, steps in a warm worker.

The run compiles the pipeline exactly as `shardflow compile` does (kept as RUN/pipeline.yaml), walks
that IR (local_dag.py: its DAG, conditions, exit handler), reuses cached steps (local_cache.py) and
hands every other task to a step worker (local_worker.py, step_worker.py) that imported TensorFlow,
Beam, TFDV and TFT once and runs each step in a fork of itself, through the same entry point as the
step's container (`kfp.dsl.executor_main`). `isolated=True` (`--isolated`) runs each step in a fresh
process instead. Every step's options are checked first, by that command's own parser and config,
so a bad `--train-args` stops the run before ExampleGen; so does a threshold naming a metric the
index's target has not (a mask column means segmentation: run_target.py, which also picks the default
threshold). The run is quiet: one line per step and the final report (`verbose=True` also shows
the steps' logs). The run directory holds everything:

    RUN_DIR/pipeline_root/shardflow-<time>/<step>/<artifact>   each step's outputs (KFP layout)
    RUN_DIR/pipeline_root/shardflow-<time>/pipeline.yaml       the compiled pipeline the run executed
    RUN_DIR/pipeline_root/shardflow-<time>/logs/<step>.log     each step's full log (worker.log: the worker's)
    RUN_DIR/pipeline_root/shardflow-<time>/logs/steps.json     each step's state (ok, cached, skipped, FAILED)
    RUN_DIR/serving/<N>/, RUN_DIR/serving/CURRENT.json         pushed (blessed) models
    RUN_DIR/runs/run-<time>.json                               the exit handler's record of each run
    RUN_DIR/spans/span-<N>-<hash>/                             each span encoded once (index with {SPAN})
    RUN_DIR/cache/<step>/<key>.json                             reusable step outputs (local_cache.py)

A step whose inputs are unchanged since an earlier run into the same RUN_DIR reuses that run's
outputs, as KFP's caching does on a cluster (`no_cache`: steps that always run, or "all").

    summary = run_locally(LocalRunConfig(index=("train=d/train.csv", "eval=d/eval.csv"), data_root="d",
                                         output="runs/demo"))
"""
from __future__ import annotations

import contextlib
import datetime
import json
import sys
from dataclasses import field, make_dataclass
from pathlib import Path
from typing import Any, Callable

from ..core import storage
from ..core.run_layout import (LOGS, PIPELINE_NAME, PIPELINE_ROOT, RECORDS, SERVING, SPAN_STORE, STEPS_RECORD,
                               run_outcome)
from ..core.errors import EXIT_REFUSED, EXIT_RETRY, ConfigError
from ..core.source_state import SOURCE_RECORD, shardflow_source
from ..evaluator.config import BLESSING, METRICS
from ..infra_validator.config import REPORT as INFRA_REPORT
from ..predict.config import MARKER as PREDICT_MARKER
from ..pusher import read_pointer
from ..tracking import TrackConfig
from ..trainer.outputs import SUMMARY_NAME as TRAINING_SUMMARY
from ..example_gen.spans import has_span_pattern
from .step_bodies import NOT_PUSHED, StepFailed
from .local_cache import CACHE_DIR, StepCache, check_no_cache
from .local_dag import DagWalk
from .local_tasks import LocalTasks
from .local_worker import StepWorker
from .run_tracking import send_run, start_tracking, tracking_line
from .step_log import StepLog
from .step_parameters import step_parameters
from .steps import summary_outputs

# The step worker runs the steps in this interpreter and ignores the image; the components still name
# one. Not pullable, so a package compiled from a local run could never be deployed.
LOCAL_RUN_IMAGE = "shardflow-local-run.invalid/not-deployable:local"
COMPILED, WORKER_LOG = "pipeline.yaml", "worker.log"  # RUN/pipeline.yaml: what the run executed
# A warm worker is replaced past this RSS. It forks a child per step and grows only by what it imports
# (measured ~1.1 GB after TensorFlow, Beam, TFDV and TFT): the bound catches a leak, not a step's use.
DEFAULT_WORKER_MAX_RSS_MB = 4096.0


class _LocalRunChecks:
    """LocalRunConfig's checks and its pipeline arguments (the fields are declared below)."""

    def __post_init__(self) -> None:
        if not self.index:
            raise ConfigError("index: give at least one [SPLIT=]CSV")
        for spec in self.index:
            path = spec.split("=", 1)[-1]
            if not has_span_pattern(path) and not Path(path).is_file():
                raise ConfigError(f"index {spec!r}: {path} is not a file")
        if isinstance(self.spans, bool) or not isinstance(self.spans, int) or self.spans < 1:
            raise ConfigError(f"spans must be an integer >= 1, got {self.spans!r}")
        if not has_span_pattern(self.data_root) and not Path(self.data_root).is_dir():
            raise ConfigError(f"data_root {self.data_root!r} is not a directory")
        if not self.output:
            raise ConfigError("output must be a directory path")
        check_no_cache(self.no_cache)
        if self.predict_index and not Path(self.predict_index).is_file():
            raise ConfigError(f"predict_index {self.predict_index!r} is not a file")
        if self.predict_data_root and not Path(self.predict_data_root).is_dir():
            raise ConfigError(f"predict_data_root {self.predict_data_root!r} is not a directory")

    def arguments(self) -> dict[str, Any]:
        """The pipeline's parameters, with absolute paths (steps run in their own processes); a step's exposed
        flag left None is not given (the pipeline's default; a threshold's: the target kind's, run_target.py)."""
        out = Path(self.output).resolve()
        index = [spec.split("=", 1)[0] + "=" + str(Path(spec.split("=", 1)[1]).resolve()) if "=" in spec
                 else str(Path(spec).resolve()) for spec in self.index]
        steps = {parameter.name: list(value) if isinstance(value, tuple) else value
                 for parameter in step_parameters() if (value := getattr(self, parameter.name)) is not None}
        if any(has_span_pattern(spec) for spec in self.index):
            # Spans are kept in the run directory, so later runs reuse what earlier runs encoded.
            steps["example_gen_options"] += ["--spans", str(self.spans), "--span-store", str(out / SPAN_STORE)]
        return {"index": index, "data_root": str(Path(self.data_root).resolve()),
                "serving_dir": str(out / SERVING), "run_record_dir": str(out / RECORDS),
                "beam_args": list(self.beam_args), "warm_start": self.warm_start, "baseline_model": self.baseline_model,
                "predict_index": str(Path(self.predict_index).resolve()) if self.predict_index else "",
                "predict_data_root": str(Path(self.predict_data_root).resolve()) if self.predict_data_root else "",
                **steps}


# Pipeline parameters of one local run. Each step's options are a tuple of its command's flags (`train_options`),
# and each flag a command exposes is a field of its own (step_parameters.py).
LocalRunConfig = make_dataclass("LocalRunConfig", [
    ("index", tuple[str, ...]), ("data_root", str), ("output", str),
    ("beam_args", tuple[str, ...], field(default=())),
    ("warm_start", str, field(default="latest")), ("baseline_model", str, field(default="latest")),
    ("spans", int, field(default=1)),  # with {SPAN} / {YYYY}{MM}{DD} in the index paths: the window's size
    ("no_cache", tuple[str, ...], field(default=())),  # steps never reused from an earlier run ("all": none is)
    ("predict_index", str, field(default="")),  # a CSV of new files the pushed model labels after Push
    ("predict_data_root", str, field(default="")),  # what predict_index's paths are relative to ('': data_root)
    *((p.name, Any, field(default=tuple(p.default) if p.flag is None else None)) for p in step_parameters()),
], bases=(_LocalRunChecks,), frozen=True, kw_only=True)
LocalRunConfig.__module__ = __name__
LocalRunConfig.__doc__ = "Pipeline parameters of one local run; option tuples are CLI flags of the matching command."


def run_locally(config: LocalRunConfig, echo: Callable[[str], None] | None = None, verbose: bool = False,
                isolated: bool = False, worker_max_rss_mb: float | None = DEFAULT_WORKER_MAX_RSS_MB,
                tracking: TrackConfig | None = None) -> dict[str, Any]:
    """Runs the pipeline; returns the summary (also printed). Raises ConfigError for a bad step
    option or a threshold the index's target kind has no metric for (before anything runs), StepFailed
    (the failed step's own line) when a step fails.

    `isolated`: each step in a fresh process (as kfp.local did), not forked from the warm worker;
    `worker_max_rss_mb`: the warm worker is replaced when its RSS passes it. `tracking`: the run sent to MLflow
    at its end (run_tracking.py); an unreachable server is a ConfigError before any step.
    """
    from .run_target import prepare_run

    arguments = prepare_run(config.arguments())
    start_tracking(tracking)
    echo = echo or (lambda text: print(text, file=sys.stdout, flush=True))
    out = Path(config.output).resolve()
    run_dir = out / PIPELINE_ROOT / f"{PIPELINE_NAME}-{datetime.datetime.now():%Y-%m-%d-%H-%M-%S-%f}"
    # the commit that runs, kept with the run: a later `shardflow track` tags it with this, not its own
    storage.write_json(str(run_dir / LOGS / SOURCE_RECORD), shardflow_source())
    steps = StepLog(echo)
    worker = StepWorker(warm=not isolated, log=run_dir / LOGS / WORKER_LOG, max_rss_mb=worker_max_rss_mb,
                        echo_to=sys.stdout if verbose else None)
    # Warm, the steps that import no framework run in a second worker without TensorFlow: the fingerprint
    # does not wait for TensorFlow's import, nor does a rerun whose heavy steps are all cached.
    light = None if isolated else StepWorker(warm=True, light=True, log=worker.log, max_rss_mb=worker_max_rss_mb,
                                             echo_to=worker.echo_to)
    succeeded, walk = False, None
    try:
        # a warm worker imports the frameworks while the pipeline compiles
        with worker, light or contextlib.nullcontext():
            spec = compiled_for_local_run(run_dir, config.no_cache)
            tasks = LocalTasks(run_dir, worker, steps, StepCache(out / CACHE_DIR, check_no_cache(config.no_cache)),
                               light)
            walk = DagWalk(spec, run_dir.name, tasks.run, steps.skipped)
            succeeded = walk.run(arguments)
    finally:
        summary = summarize(out, run_dir)  # this run's, whatever other runs write into `out`
        if walk and walk.failed_task and (summary.get("push") or {}).get("refused"):
            summary["push"]["exit_code"] = walk.failed_exit_code  # 75: lost to another push, worth a rerun
        if summary.get("run"):
            storage.write_json(str(Path(summary["run"]) / LOGS / STEPS_RECORD), steps.steps)
            summary["steps"] = steps.steps
            summary["tracking"] = send_run(tracking, Path(summary["run"]))
        echo(render_summary(summary))
    if not succeeded:
        outcome = summary.get("outcome") or {}
        code = walk.failed_exit_code if walk and walk.failed_exit_code in (EXIT_REFUSED, EXIT_RETRY) else 1
        raise StepFailed(outcome.get("message") or f"task {walk.failed_task if walk else '?'} failed",
                         code)  # a push's verdict (3) or lost race (75, worth a rerun); any other failed step: 1
    return summary


def compiled_for_local_run(run_dir: Path, no_cache: tuple[str, ...]) -> dict[str, Any]:
    """The pipeline as `shardflow compile --image LOCAL_RUN_IMAGE` writes it, kept as RUN/pipeline.yaml."""
    import yaml

    from .compiler import compile_pipeline

    path = compile_pipeline(run_dir / COMPILED, LOCAL_RUN_IMAGE, no_cache=check_no_cache(no_cache),
                            allow_mutable_image=True)
    with open(path) as compiled:
        return yaml.safe_load(compiled)


def summarize(out: Path, run_dir: Path | None = None) -> dict[str, Any]:
    """What the run `run_dir` (default: the newest run in `out`) produced, read from its step outputs and its
    own outcome record: another run into the same `out` may be running, or have finished, meanwhile."""
    if run_dir is None:
        runs = sorted((out / PIPELINE_ROOT).glob(f"{PIPELINE_NAME}-*"), key=lambda p: p.stat().st_mtime)
        run_dir = runs[-1] if runs else None
    if run_dir is None or not run_dir.is_dir():
        return {"run": None}
    summary: dict[str, Any] = {"run": str(run_dir), "outcome": run_outcome(out, run_dir.name),
                               "serving_pointer": read_pointer(str(out / SERVING))}
    steps = summary_outputs()  # {"examples": "example-gen/examples", ...}
    summary["outputs"] = {name: str(run_dir / rel) for name, rel in steps.items() if (run_dir / rel).exists()}
    report = run_dir / steps["report"]
    summary["report"] = report.read_text() if report.is_file() else None
    summary["blessing"] = _json(run_dir / steps["evaluation"] / BLESSING)
    summary["metrics"] = _json(run_dir / steps["evaluation"] / METRICS)
    summary["training"] = _json(run_dir / steps["model"] / TRAINING_SUMMARY)
    summary["serving_check"] = _json(run_dir / steps["infra"] / INFRA_REPORT)
    summary["predict"] = _json(run_dir / steps["predictions"] / PREDICT_MARKER)
    summary["push"] = _push_outcome(run_dir / steps["pushed"], summary["outcome"] or {})
    return summary


def _push_outcome(pushed: Path, outcome: dict[str, Any]) -> dict[str, Any] | None:
    """What this run's Push did: {"pushed": its version directory}, or {"refused": the Pusher's one line} (the
    step failed with it, e.g. the served model is no longer the baseline the Evaluator gated against), or None
    when Push did not run. The "serving:" line says what is served now, which another run may have pushed."""
    if pushed.is_file():
        return {"pushed": pushed.read_text().strip()}
    message = str(outcome.get("message") or "")
    if outcome.get("failed_task") == "push" and NOT_PUSHED in message:
        return {"refused": message.split(NOT_PUSHED, 1)[1]}
    return None


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else None


def render_summary(summary: dict[str, Any]) -> str:
    if summary.get("run") is None:
        return "shardflow run: no step ran"
    lines = [summary["report"] or "(no run report: the run stopped before the evaluation)"]
    outcome = summary.get("outcome") or {}
    lines.append(f"outcome: {outcome.get('state', 'unknown')}"
                 + (f" (failed step: {outcome['failed_task']})" if outcome.get("failed_task") else ""))
    for name, path in summary.get("outputs", {}).items():
        lines.append(f"  {name}: {path}")
    lines.append(f"  logs: {Path(summary['run']) / 'logs'}")
    pointer = summary.get("serving_pointer")
    lines.append(f"serving: {pointer['model']} (version {pointer['version']})" if pointer else "serving: nothing pushed")
    blessing = summary.get("blessing") or {}
    serving_check = summary.get("serving_check") or {}
    refused = (summary.get("push") or {}).get("refused")
    if blessing and not blessing.get("blessed"):  # the one line a scheduled run's log is read for
        lines.append("not pushed: " + "; ".join(blessing.get("reasons") or ["not blessed"]))
    elif refused:  # blessed, but the served model changed since the Evaluator gated against it
        retry = " (exit 75: rerun, to evaluate against the served model)" if summary["push"].get("exit_code") == 75 else ""
        lines.append(NOT_PUSHED + refused + retry)
    elif serving_check and not serving_check.get("blessed"):
        lines.append("not pushed: the serving check failed: " + "; ".join(serving_check.get("reasons") or []))
    if tracking_line(summary.get("tracking")):
        lines.append(tracking_line(summary["tracking"]))  # type: ignore[arg-type]
    predicted = summary.get("predict")
    if predicted:
        lines.append(f"predictions: {predicted.get('predicted')} of {predicted.get('rows')} rows "
                     f"({predicted.get('rejected')} rejected) in {summary['outputs'].get('predictions')}")
    return "\n".join(lines)
