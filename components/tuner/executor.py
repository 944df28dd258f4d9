"""`run(config)`: a hyperparameter search over the Trainer's options, KerasTuner's oracles picking the values.

Each trial is a real, short `shardflow train` run on the same streamed shards, written to
`TOUT/trials/<id>/` (its model, history, TensorBoard logs), so a trial is inspected like any
training. KerasTuner keeps its state in `TOUT/oracle/`: a search killed at any moment, rerun with the
same output, goes on with the trials it had not finished, and a trial trained to its end is never
trained again (state.py: how KerasTuner's own files survive a kill). Hyperband's later rounds
warm-start from the earlier round's model of the same trial and train only the epochs it has not had.

Outputs: `TOUT/best_hyperparameters.json` (the best trial's values, the objective and its score, and
every trial's values and score), written last: it is the completion marker.

    from shardflow.tuner import TunerConfig, run
    best = run(TunerConfig(base=TrainerConfig(...), output="runs/tune", max_trials=8))
    best["values"]     # {"learning_rate": 0.0031}
"""
from __future__ import annotations

import time
from typing import Any, Callable

from ..core import storage
from ..core.cloud_env import enable_tensorflow_filesystems
from ..core.errors import ShardflowError
from ..core.output_dir import OutputDir
from ..trainer.outputs import SUMMARY_NAME
from ..trainer.hyperparameters import HYPERPARAMETERS_FILE, hyperparameters_record
from ..trainer.task import resolve_task
from .config import TunerConfig
from .space import Dimension, parse_space, register
from .state import forget_unlisted, reset_if_damaged, write_whole

TRIALS, ORACLE = "trials", "oracle"
TRIAL_VALUES = "trial_values.json"  # in a trial's output: the values it was trained with


def output_dir(root: str) -> OutputDir:
    return OutputDir(root, marker=HYPERPARAMETERS_FILE)


def run(config: TunerConfig, echo: Callable[[str], None] = print) -> dict[str, Any]:
    config.check_inputs()
    enable_tensorflow_filesystems([config.output, config.base.input.examples])
    import keras_tuner as kt

    dimensions = parse_space(config.space)
    objective = config.objective or _default_objective(config)
    out = output_dir(config.output)
    if out.is_complete():  # a finished search: this one starts anew
        for name in (TRIALS, ORACLE):
            storage.remove(storage.join(out.root, name))
    with out.staged_run():
        tuner = _tuner(kt, config, dimensions, objective, echo)
        started = time.time()
        try:
            tuner.search(verbose=0)
        except kt.errors.FatalError:
            if tuner.user_error is not None:
                raise tuner.user_error from None
            raise
        record = _record(tuner, objective, started)
        out.complete([], record)
    echo(f"tune: best {objective} {record['score']} with {record['values']} "
         f"({len(record['trials'])} trials in {record['seconds']:.0f} s); "
         f"{storage.join(out.root, HYPERPARAMETERS_FILE)}")
    return record


def _default_objective(config: TunerConfig) -> str:
    """val_mean_iou for masks, val_loss (minimized) for boxes: a detector logs no accuracy; else val_accuracy."""
    return {"segmentation": "val_mean_iou", "detection": "val_loss"}.get(resolve_task(config.base.input).kind,
                                                                          "val_accuracy")


def _tuner(kt: Any, config: TunerConfig, dimensions: tuple[Dimension, ...], objective: str,
           echo: Callable[[str], None]) -> Any:
    write_whole(kt)
    reset_if_damaged(storage.join(config.output, ORACLE), echo)
    space = kt.HyperParameters()
    for dimension in dimensions:
        register(space, dimension)
    goal = kt.Objective(objective, "min" if "loss" in objective else "max")
    if config.algorithm == "hyperband":
        oracle = kt.oracles.HyperbandOracle(goal, max_epochs=config.base.fit.epochs, factor=config.hyperband_factor,
                                            seed=config.seed, hyperparameters=space)
    else:
        oracle = kt.oracles.RandomSearchOracle(goal, max_trials=config.max_trials, seed=config.seed,
                                               hyperparameters=space)
    # KerasTuner reads seed 0 as "none" and draws a random one; a search that starts again (a kill
    # before its first save, a reset state) must draw the same trials to find their outputs.
    oracle.seed = oracle._seed_state = config.seed
    return _trainer_tuner(kt)(oracle, config, dimensions, objective, echo)


def _trainer_tuner(kt: Any) -> type:
    class TrainerTuner(kt.engine.base_tuner.BaseTuner):
        """A trial is `shardflow train` with the trial's values; its score is the last epoch's objective."""

        def __init__(self, oracle: Any, config: TunerConfig, dimensions: tuple[Dimension, ...], objective: str,
                     echo: Callable[[str], None]) -> None:
            super().__init__(oracle, directory=config.output, project_name=ORACLE)
            self.config, self.dimensions, self.objective, self.echo = config, dimensions, objective, echo
            self.user_error: ShardflowError | None = None
            done = sum(t.status == "COMPLETED" for t in self.oracle.trials.values())
            echo(f"tune: {config.algorithm} search, {done} trials already finished "
                 f"(KerasTuner's state: {storage.join(config.output, ORACLE)})")

        def reload(self) -> None:
            super().reload()
            forget_unlisted(self.oracle)

        def run_trial(self, trial: Any, *_: Any, **__: Any) -> dict[str, float]:
            try:
                return self._train(trial)
            except ShardflowError as err:  # a user's mistake stops the search (KerasTuner would skip the trial)
                self.user_error = err
                raise kt.errors.FatalError(str(err)) from None

        def _train(self, trial: Any) -> dict[str, float]:
            from ..trainer.executor import run as train

            values = {d.name: register(trial.hyperparameters, d) for d in self.dimensions}
            config = trial_config(self.config, trial.trial_id, values, trial.hyperparameters.values)
            started = time.time()
            summary = finished_trial(config.export.output, trial.hyperparameters.values)
            how = "trained by an earlier run: taken from its output"
            if summary is None:
                storage.write_json(storage.join(config.export.output, TRIAL_VALUES), trial.hyperparameters.values)
                summary = train(config, echo=lambda _: None)
                how = f"{config.fit.epochs} epochs, {time.time() - started:.1f} s"
            last = summary["history"][-1] if summary["history"] else {}
            if self.objective not in last:
                raise ShardflowError(f"objective {self.objective!r} is not a training metric "
                                     f"(the trials log {', '.join(k for k in last if k != 'phase')})")
            self.echo(f"tune: trial {trial.trial_id}: {values} → {self.objective} {last[self.objective]:.4f} ({how})")
            return {self.objective: float(last[self.objective])}

    return TrainerTuner


def finished_trial(output: str, tuner_values: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a trial trained to the end with these values by a search killed before its oracle
    recorded the score (KerasTuner runs such a trial again); None when it must be trained."""
    from ..trainer.executor import output_dir as trainer_output

    values_file = storage.join(output, TRIAL_VALUES)
    if not trainer_output(output).is_complete() or not storage.exists(values_file):
        return None
    return storage.read_json(storage.join(output, SUMMARY_NAME)) if storage.read_json(values_file) == tuner_values \
        else None


def trial_config(config: TunerConfig, trial_id: str, values: dict[str, Any], tuner_values: dict[str, Any]) -> Any:
    """The Trainer's config of one trial; Hyperband's later rounds continue the earlier round's model."""
    epochs = int(tuner_values.get("tuner/epochs", config.base.fit.epochs))
    warm_start = config.base.model.warm_start
    previous = tuner_values.get("tuner/trial_id")
    if previous:
        warm_start = storage.join(config.output, TRIALS, previous, "model")
        epochs -= int(tuner_values.get("tuner/initial_epoch", 0))
    output = storage.join(config.output, TRIALS, trial_id)
    return config.base.replaced(output=output, epochs=max(epochs, 1), warm_start=warm_start, **values)


def _record(tuner: Any, objective: str, started: float) -> dict[str, Any]:
    trials = [t for t in tuner.oracle.trials.values() if t.score is not None]
    if not trials:
        raise ShardflowError("tune: no trial finished; see the trials' outputs under " + tuner.config.output)
    best = tuner.oracle.get_best_trials(1)[0]
    listed = [{"trial": t.trial_id, "values": {k: v for k, v in t.hyperparameters.values.items()
                                               if not k.startswith("tuner/")}, "score": t.score} for t in trials]
    return hyperparameters_record(best.hyperparameters.values, objective, best.score, {
        "trial": best.trial_id, "trials": listed, "seconds": round(time.time() - started, 1),
        "algorithm": tuner.config.algorithm})
