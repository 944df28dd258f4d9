"""find-label-issues' options: values checked when the config is built, storage checked before any training,
and the command's one-line errors with exit code 2. No model is trained here."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from shardflow.cli import main
from shardflow.core.errors import ConfigError
from shardflow.label_finder import LabelFinderConfig
from shardflow.label_finder.cli import add_arguments, config_from_args
from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig

from helpers_images import write_csv, write_png, random_pixels

pytestmark = pytest.mark.unit


def _train(**options: object) -> TrainerConfig:
    base = TrainerConfig(input=InputOptions(examples="runs/examples"), fit=FitOptions(epochs=2),
                         export=ExportOptions(output="runs/issues"))
    return base.replaced(**options)


@pytest.mark.parametrize("options, message", [
    ({"folds": 1}, "folds must be an integer >= 2, got 1"),
    ({"folds": "3"}, "folds must be an integer >= 2, got '3'"),
    ({"rule": "both"}, "rule must be one of ('noise_rate', 'off_diagonal'), got 'both'"),
    ({"memory_mb": 0}, "memory_mb must be a number of megabytes > 0, got 0"),
    ({"output": ""}, "output must be a non-empty path or URI, got ''"),
    ({"output": "runs/examples/issues"}, "must be a directory apart from examples"),
    ({"train": _train(warm_start="runs/model")}, "a fold model must not start from weights"),
])
def test_bad_values_are_config_errors_naming_the_option(options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        LabelFinderConfig(**{"train": _train(), "output": "runs/issues", **options})


@pytest.mark.parametrize("name, value", [("box_iou", 1.0), ("box_iou", True), ("pictures", -1)])
def test_the_box_options_are_checked(name: str, value: object) -> None:
    with pytest.raises(ConfigError, match=f"^{name} must be .*, got {value!r}$"):
        LabelFinderConfig(train=_train(), output="runs/issues", **{name: value})


def test_each_fold_model_trains_on_the_other_folds_into_its_own_output() -> None:
    config = LabelFinderConfig(train=_train(seed=7, model="lenet", batch_size=16), output="runs/issues", folds=4)
    fold = config.fold_trainer_config(2, "runs/issues/.staging/folds/2/train")
    folds = fold.input.train_folds
    assert fold.export.output == "runs/issues/.staging/folds/2/train" and folds.folds == (0, 1, 3)
    assert (folds.count, folds.seed, fold.model.name, fold.input.batch_size) == (4, 7, "lenet", 16)
    assert config.held_out(2).folds == (2,) and config.held_out(2).seed == 7


def test_every_train_flag_reaches_the_fold_models() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--examples", "ex", "--output", "out", "--epochs", "3", "--model", "lenet",
                              "--batch-size", "8", "--augment", "flip", "--folds", "5", "--rule", "off_diagonal"])
    config = config_from_args(args, [])
    assert (config.folds, config.rule, config.output, config.keep_models) == (5, "off_diagonal", "out", False)
    train = config.train
    got = (train.fit.epochs, train.model.name, train.input.batch_size, train.input.augment)
    assert got == (3, "lenet", 8, ("flip",))


@pytest.fixture(scope="module")
def tiny_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ExampleGen output of 2 train and 2 eval rows."""
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    root = tmp_path_factory.mktemp("tiny")
    rng = __import__("numpy").random.default_rng(0)
    for split in ("train", "eval"):
        for i in range(2):
            write_png(root / f"{split}{i}.png", random_pixels(rng, (4, 4, 1)))
        write_csv(root / f"{split}.csv", ["x", "y"], [[f"{split}{i}.png", i] for i in range(2)])
    out = root / "examples"
    run(ExampleGenConfig(indexes=tuple(IndexSpec(str(root / f"{s}.csv"), s) for s in ("train", "eval")),
                         data_root=str(root), output=str(out), near_duplicates="off"), echo=lambda _: None)
    return out


@pytest.mark.parametrize("flags, message", [
    (["--folds", "1"], "folds must be an integer >= 2, got 1"),
    (["--folds", "3"], "folds 3 needs at least 3 train examples"),
    (["--warm-start", "m"], "drop --warm-start"),
    (["--epochs", "2", "--folds-typo", "3"], "unknown option --folds-typo"),
    (["--rule", "both"], "argument --rule: invalid choice: 'both'"),
])
def test_the_command_refuses_with_one_line_and_exit_code_2(tiny_examples: Path, tmp_path: Path, flags: list[str],
                                                           message: str, capsys: pytest.CaptureFixture) -> None:
    argv = ["find-label-issues", "--examples", str(tiny_examples), "--output", str(tmp_path / "out"), *flags]
    if "--epochs" not in flags:
        argv += ["--epochs", "2"]
    try:
        code = main(argv)
    except SystemExit as exit_:  # argparse's own errors (a bad choice) exit 2 before the command runs
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err, err
    assert "Traceback" not in err
    assert not (tmp_path / "out").exists()  # refused before the output is touched
