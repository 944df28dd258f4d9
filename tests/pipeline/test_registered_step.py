"""A step added from outside the package through its row alone: a toy model-card command, written by this test
as a package of its own, registered with `SHARDFLOW_STEPS`, compiled into the pipeline and run by `shardflow run`.

Nothing in shardflow names it: its task, its pipeline parameters (its options, and the flag its cli marks with
`expose`), its `shardflow run` flags, its KFP component (components.command_step, renamed) and its wiring (after
the steps whose artifacts it consumes) all come from the row (pipelines/step_spec.py).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
IMAGE = "registry.example.com/ml/shardflow@sha256:" + "3f1c5e0a" * 8

TOY_PACKAGE = {
    "__init__.py": '''
from shardflow.commands import Command
from shardflow.pipelines.step_spec import Consumed, Resources, Step, StepOptions

from . import cli

STEP = Step("model-card", Resources("500m", "1Gi"), Command("model-card", "a one-page model card", cli),
            options=StepOptions("model_card_options", "--model-card-args"),
            consumes=(Consumed("--model", "train", "model"), Consumed("--evaluation", "evaluate", "evaluation")),
            produces="card")
''',
    "cli.py": '''
from shardflow.core.flag_parser import config_from_flags
from shardflow.core.pipeline_flags import expose

from .config import CardConfig


def add_arguments(parser):
    add = parser.add_argument
    add("--model", required=True)
    add("--evaluation", required=True)
    add("--output", required=True)
    expose(add("--title", default="Model card"), "card_title", "--card-title")
    add("--metric", default="accuracy")


def config_from_args(args, extra):
    return config_from_flags(CardConfig, args)
''',
    "config.py": '''
import os
from dataclasses import dataclass

from shardflow.core.errors import ConfigError


@dataclass(frozen=True, kw_only=True)
class CardConfig:
    model: str
    evaluation: str
    output: str
    title: str = "Model card"
    metric: str = "accuracy"

    def check_inputs(self):
        if not os.path.isfile(os.path.join(self.evaluation, "metrics.json")):
            raise ConfigError(f"--evaluation {self.evaluation}: no metrics.json")
''',
    "executor.py": '''
import json
import os


def run(config):
    metrics = json.load(open(os.path.join(config.evaluation, "metrics.json")))["overall"]
    training = json.load(open(os.path.join(config.model, "training.json")))
    os.makedirs(config.output, exist_ok=True)
    card = {"title": config.title, config.metric: metrics[config.metric], "steps": training["optimizer_steps"]}
    json.dump(card, open(os.path.join(config.output, "card.json"), "w"))
    return card
''',
}


@pytest.fixture(scope="module")
def plugin_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("plugins")
    (root / "toy_card").mkdir()
    for name, source in TOY_PACKAGE.items():
        (root / "toy_card" / name).write_text(source.lstrip())
    path = os.pathsep.join(p for p in (str(root), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "SHARDFLOW_STEPS": "toy_card"}


def _shardflow(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([SHARDFLOW, *argv], capture_output=True, text=True, timeout=900, env=env)


def test_a_registered_step_is_in_the_compiled_pipeline(plugin_env: dict[str, str], tmp_path: Path) -> None:
    done = _shardflow(plugin_env, "compile", "--output", str(tmp_path / "p.yaml"), "--image", IMAGE,
                      "--param", 'model_card_options=["--metric", "macro_f1"]')
    assert done.returncode == 0, done.stderr
    ir = yaml.safe_load((tmp_path / "p.yaml").read_text())
    parameters = ir["root"]["inputDefinitions"]["parameters"]
    assert parameters["card_title"]["defaultValue"] == "Model card"  # its exposed flag, typed from the flag
    assert parameters["model_card_options"]["defaultValue"] == ["--metric", "macro_f1"]
    handler = next(c for name, c in ir["components"].items() if name.startswith("comp-exit-handler"))
    task = handler["dag"]["tasks"]["model-card"]
    assert sorted(task["dependentTasks"]) == ["evaluate", "train"]
    assert task["inputs"]["artifacts"]["input_1"]["taskOutputArtifact"] == {"outputArtifactKey": "model",
                                                                             "producerTask": "train"}
    # Any flag of a built-in step's command reaches it the same way: the Evaluator's memory budget.
    evaluate = handler["dag"]["tasks"]["evaluate"]["inputs"]["parameters"]["options"]
    assert evaluate == {"componentInputParameter": "pipelinechannel--evaluate_options"}
    baked = _shardflow(plugin_env, "compile", "--output", str(tmp_path / "e.yaml"), "--image", IMAGE,
                       "--param", 'evaluate_options=["--memory-mb", "256"]')
    assert baked.returncode == 0, baked.stderr
    defaults = yaml.safe_load((tmp_path / "e.yaml").read_text())["root"]["inputDefinitions"]["parameters"]
    assert defaults["evaluate_options"]["defaultValue"] == ["--memory-mb", "256"]
    refused = _shardflow(plugin_env, "compile", "--output", str(tmp_path / "f.yaml"), "--image", IMAGE,
                         "--param", 'evaluate_options=["--memory-mb", "lots"]')
    assert refused.returncode == 2 and "evaluate_options: shardflow evaluate: error: argument --memory-mb" in \
        refused.stderr and not (tmp_path / "f.yaml").exists()
    # Without the registration the pipeline is the golden one: no trace of the step.
    plain = {key: value for key, value in plugin_env.items() if key != "SHARDFLOW_STEPS"}
    assert _shardflow(plain, "compile", "--output", str(tmp_path / "q.yaml"), "--image", IMAGE).returncode == 0
    assert "model-card" not in (tmp_path / "q.yaml").read_text()


def test_a_registered_step_runs_in_shardflow_run_with_its_flags(plugin_env: dict[str, str], demo_data: Path,
                                                               tmp_path: Path) -> None:
    digits, out = demo_data / "digits", tmp_path / "run"
    bad = _shardflow(plugin_env, "run", "--index", f"train={digits / 'train.csv'}", "--data-root", str(digits),
                     "--output", str(out), "--model-card-args", "--metrc accuracy")
    assert bad.returncode == 2 and bad.stderr.startswith("shardflow run: error: --card-title/--model-card-args: "
                                                         "shardflow model-card: error: unknown option --metrc")
    done = _shardflow(plugin_env, "run", "--index", f"train={digits / 'train.csv'}", "--index",
                      f"eval={digits / 'eval.csv'}", "--data-root", str(digits), "--output", str(out),
                      "--train-args", "--epochs 1", "--threshold", "accuracy>=0.5",
                      "--card-title", "Digits", "--model-card-args", "--metric macro_f1")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = (out / "pipeline_root").glob("shardflow-*")
    steps = json.loads((run / "logs" / "steps.json").read_text())
    assert steps["model-card"]["state"] == "ok"
    card = json.loads((run / "model-card" / "output" / "card.json").read_text())
    metrics = json.loads((run / "evaluate" / "evaluation" / "metrics.json").read_text())["overall"]
    training = json.loads((run / "train" / "model" / "training.json").read_text())
    assert card == {"title": "Digits", "macro_f1": metrics["macro_f1"], "steps": training["optimizer_steps"]}
    assert f"  card: {run / 'model-card' / 'output'}" in done.stdout  # the run summary lists what it produced
