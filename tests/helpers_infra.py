"""The infra validation tests' one real model, built once per machine, and the helpers both test files use.

scikit-learn's digits go through ExampleGen (PNG storage) and a 5-step Trainer run, whose export has both
signatures; the Evaluator scores it and keeps its canaries; `shardflow infra-validate` checks it with its
defaults. Each is a session fixture built through `shared_fixtures.build_once`, so the two test files
(tests/serving/test_infra_validator.py, test_infra_refusals.py) share one build even on two xdist workers.
Read only: a test writes under its own tmp_path.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import tensorflow as tf

from shardflow.cli import main as shardflow_main
from shardflow.evaluator import EvaluatorConfig
from shardflow.evaluator import run as evaluate
from shared_fixtures import build_once

QUIET = {"echo": lambda _: None}
WARMUP = "assets.extra/tf_serving_warmup_requests"
FORBIDDEN = ("shardflow", "tensorflow_io", "tf_keras", "keras")


def evaluated(model: Path, examples: Path, output: Path) -> Path:
    """The Evaluator's output for `model` on the eval split (every model passes `accuracy>=0`)."""
    outcome = evaluate(EvaluatorConfig(model=str(model), examples=str(examples), output=str(output),
                                       thresholds=("accuracy>=0",)), **QUIET)
    assert outcome.blessing.blessed
    return output


def report(out: Path) -> dict:
    return json.loads((out / "infra_validation.json").read_text())


def tree(location: Path) -> dict[str, bytes]:
    return {str(p.relative_to(location)): p.read_bytes() for p in sorted(location.rglob("*")) if p.is_file()}


def wrapped(model: Path, target: Path, serve_fn: Callable) -> Path:
    """A SavedModel whose serving_default is `serve_fn(base_signature, examples)`; shardflow_model.json kept."""
    base = tf.saved_model.load(str(model))

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(examples: tf.Tensor) -> dict[str, tf.Tensor]:
        return serve_fn(base.signatures["serving_default"], examples)

    module = tf.Module()
    module.base, module.serve = base, serve
    tf.saved_model.save(module, str(target), signatures={"serving_default": serve})
    shutil.copy(model / "shardflow_model.json", target / "shardflow_model.json")
    return target


def _built(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], Path]) -> Path:
    def record(folder: Path) -> dict[str, Any]:
        return {"path": str(build(folder))}

    return Path(build_once(factory, name, record)["path"])


@pytest.fixture(scope="session")
def examples(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardflow.example_gen import ExampleGenConfig, IndexSpec
    from shardflow.example_gen import run as example_gen

    def build(folder: Path) -> Path:
        digits = demo_data / "digits"
        indexes = tuple(IndexSpec(str(digits / f"{split}.csv"), split) for split in ("train", "eval"))
        example_gen(ExampleGenConfig(indexes=indexes, data_root=str(digits), output=str(folder / "examples"),
                                     storage=(("*", "png"),)), **QUIET)
        return folder / "examples"

    return _built(tmp_path_factory, "infra-examples", build)


@pytest.fixture(scope="session")
def model(examples: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from shardflow.trainer import ExportOptions, FitOptions, InputOptions, TrainerConfig
    from shardflow.trainer import run as train

    def build(folder: Path) -> Path:
        train(TrainerConfig(input=InputOptions(examples=str(examples), batch_size=32, input_probe_batches=1),
                            fit=FitOptions(steps=5), export=ExportOptions(output=str(folder / "train"))), **QUIET)
        return folder / "train" / "model"

    return _built(tmp_path_factory, "infra-model", build)


@pytest.fixture(scope="session")
def evaluation(model: Path, examples: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _built(tmp_path_factory, "infra-evaluation", lambda folder: evaluated(model, examples, folder / "eval"))


@pytest.fixture(scope="session")
def good_infra(model: Path, evaluation: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    """`shardflow infra-validate` of the trained model with its defaults (batch sizes 1, 8, 32; 256 requests)."""
    def build(folder: Path) -> dict[str, Any]:
        out = folder / "infra"
        code = shardflow_main(["infra-validate", "--model", str(model), "--evaluation", str(evaluation),
                               "--output", str(out)])
        return {"code": code, "out": str(out)}

    built = build_once(tmp_path_factory, "infra-good", build)
    return built["code"], Path(built["out"])
