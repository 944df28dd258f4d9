"""`shardflow run` knows its target kind before any step: a mask column in the index means
segmentation, whose default blessing threshold is a segmentation metric; every step's flags and every
threshold metric are checked against it before the first step, so a mistake costs a second.

The indexes name files that need not exist: roles come from the cells' extensions, and nothing here
reads an image. The refusals run the real `shardflow` command in a subprocess (each well under a
second after Python starts); nothing runs a pipeline step.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from shardflow.core.errors import ConfigError
from shardflow.demo_boxes import write_boxes
from shardflow.evaluator.config import DEFAULT_THRESHOLDS
from shardflow.example_gen.csv_index import read_head
from shardflow.pipelines.local_run import LocalRunConfig
from shardflow.pipelines.run_target import prepare_run

from helpers_images import write_csv

SHARDFLOW = str(Path(sys.executable).with_name("shardflow"))
GOLDEN_IMAGE = ("registry.example.com/ml/shardflow"
                "@sha256:3f1c5e0a9b7d2c4e6f8a0b1c3d5e7f9a1b3c5d7e9f0a2b4c6d8e0f1a3b5c7d9e")


def _index(root: Path, header: list[str], name: str = "train.csv") -> Path:
    """Six rows: an image, then a mask or a label per the header, and a site column."""
    cells = {"image": "img/{}.png", "mask": "img/{}_mask.png", "label": "{}", "site": "site-{}"}
    return write_csv(root / name, header, [[cells[c].format(i % 3) for c in header] for i in range(6)])


@pytest.fixture
def masks(tmp_path: Path) -> Path:
    return _index(tmp_path / "seg", ["image", "mask", "site"])


@pytest.fixture
def labels(tmp_path: Path) -> Path:
    return _index(tmp_path / "cls", ["image", "label", "site"])


def _prepared(index: Path, out: Path, **options: object) -> dict:
    config = LocalRunConfig(index=(f"train={index}",), data_root=str(index.parent), output=str(out), **options)
    return prepare_run(config.arguments())


def test_a_mask_index_without_threshold_gets_the_segmentation_default(masks: Path, labels: Path,
                                                                       tmp_path: Path) -> None:
    assert LocalRunConfig.eval_thresholds is None  # the dataclass default: "the target kind's", not accuracy
    assert _prepared(masks, tmp_path / "out")["eval_thresholds"] == ["mean_iou>=0.5"]
    assert _prepared(labels, tmp_path / "out")["eval_thresholds"] == ["accuracy>=0.9"]
    assert DEFAULT_THRESHOLDS == {"classification": "accuracy>=0.9", "segmentation": "mean_iou>=0.5",
                                  "detection": "ap50>=0.5"}


def test_a_box_index_is_a_detection_run_with_the_detection_default_and_metrics(tmp_path: Path) -> None:
    """The demo's box index (the AutoML layout, no header): its boxes are the target before any step runs."""
    write_boxes(tmp_path / "boxes", count=12)
    index = tmp_path / "boxes" / "train.csv"
    assert _prepared(index, tmp_path / "out")["eval_thresholds"] == [DEFAULT_THRESHOLDS["detection"]]
    assert _prepared(index, tmp_path / "out", eval_thresholds=("ap75>=0.2",))["eval_thresholds"] == ["ap75>=0.2"]
    with pytest.raises(ConfigError, match=r"'accuracy' is not a detection metric.*target 'image/object' is a "
                                          r"boxes column"):
        _prepared(index, tmp_path / "out", eval_thresholds=("accuracy>=0.5",))


def test_the_target_is_the_trainers_and_comes_from_the_newest_spans(masks: Path, tmp_path: Path) -> None:
    # --label names a value column: the Trainer classifies it, mask or not.
    chosen = _prepared(masks, tmp_path / "out", train_options=("--epochs", "1", "--label", "site"))
    assert chosen["eval_thresholds"] == ["accuracy>=0.9"]
    # --role demotes the mask: no target is left, named before any step.
    with pytest.raises(ConfigError, match=r"--train-args: .*cannot choose the target.*mask \(metadata\)"):
        _prepared(masks, tmp_path / "out", example_gen_options=("--role", "mask=metadata"))
    # Span patterns: the newest span's index decides.
    data = tmp_path / "spans"
    _index(data / "span-1", ["image", "label"])
    _index(data / "span-2", ["image", "mask"])
    config = LocalRunConfig(index=(f"train={data}/span-{{SPAN}}/train.csv",), data_root=str(data),
                            output=str(tmp_path / "out"))
    assert prepare_run(config.arguments())["eval_thresholds"] == ["mean_iou>=0.5"]


def test_a_valid_run_is_not_refused(masks: Path, labels: Path, tmp_path: Path) -> None:
    options = {"eval_thresholds": ("mean_iou>=0.3", "pixel_accuracy>0.8"), "max_regressions": ("mean_dice=0.05",),
               "train_options": ("--epochs", "2", "--model", "unet"), "example_gen_options": ("--resize", "8x8"),
               "transform_options": ("--mask-classes", "mask=3"), "beam_args": ("--direct_num_workers=2",)}
    config = LocalRunConfig(index=(f"train={masks}",), data_root=str(masks.parent), output=str(tmp_path / "o"),
                            **options)
    assert prepare_run(config.arguments()) == config.arguments()  # checked, nothing changed
    assert _prepared(labels, tmp_path / "o", eval_thresholds=("accuracy>=0.5",))["eval_thresholds"] == ["accuracy>=0.5"]
    # A user preprocessing_fn decides the target only when Transform runs: no target check then.
    custom = _prepared(masks, tmp_path / "o", transform_options=("--preprocessing", "prep.py:fn"),
                       eval_thresholds=("accuracy>=0.5",))
    assert custom["eval_thresholds"] == ["accuracy>=0.5"]


@pytest.mark.parametrize("flags, says", [
    (["--threshold", "accuracy>=0.5"],
     ["--threshold", "threshold 'accuracy>=0.5': 'accuracy' is not a segmentation metric", "mean_iou",
      "target 'mask' is a mask column"]),
    (["--max-regression", "accuracy=0.1"], ["'accuracy' is not a segmentation metric"]),
    (["--train-args", "--epohcs 3"],
     ["--train-args", "shardflow train", "unknown option --epohcs", "did you mean --epochs?"]),
    (["--example-gen-args", "--resise 8x8"], ["--example-gen-args", "unknown option --resise", "--resize?"]),
    (["--transform-args", "--mask-classes mask=0"],
     ["--transform-args", "mask_classes of 'mask' must be an integer >= 1, got 0"]),
    (["--train-args", "--epochs 1 --label nope"], ["--train-args", "label 'nope' is not a target of the examples"]),
    (["--example-gen-args", "--resize imgae=8x8"],  # per-column options meet the index's header up front too
     ["--index/--example-gen-args", "--resize names columns ['imgae']"]),
    (["--validate-args", "--no-drfit site"],
     ["--drift-threshold/--validation-schema/--validation-warn-only/--validate-args", "unknown option --no-drfit",
      "--no-drift?"]),
    (["--regression-tolerance", "-0.1"], ["regression tolerance '-0.1' must be >= 0 (or 'off')"]),
    (["--bootstrap-resamples", "20"], ["--bootstrap-resamples", "bootstrap_resamples 20 is too few"]),
    (["--no-cache", "evaluate"], ["no_cache 'evaluate' is not a cached step"]),
])
def test_a_mistake_fails_before_the_first_step_in_one_line(masks: Path, tmp_path: Path, flags: list[str],
                                                           says: list[str]) -> None:
    out = tmp_path / "out"
    env = dict(os.environ)  # the process defaults: the command's own (core/process_defaults.py)
    done = subprocess.run([SHARDFLOW, "run", "--index", f"train={masks}", "--data-root", str(masks.parent),
                           "--output", str(out), *flags], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 2, done.stderr  # ConfigError's exit code
    (line,) = done.stderr.strip().splitlines()  # one line, no traceback
    assert line.startswith("shardflow run: error: ")
    for text in says:
        assert text in line
    assert not out.exists()  # no step ran: not even the pipeline root was made


def test_compile_checks_what_it_bakes_and_bakes_the_target_kinds_default(masks: Path, tmp_path: Path) -> None:
    from shardflow.pipelines.compiler import compile_pipeline

    where = {"index": json.dumps([f"train={masks}"]), "data_root": str(masks.parent)}
    ir = yaml.safe_load(Path(compile_pipeline(tmp_path / "p.yaml", GOLDEN_IMAGE, params=where)).read_text())
    assert ir["root"]["inputDefinitions"]["parameters"]["eval_thresholds"]["defaultValue"] == ["mean_iou>=0.5"]
    with pytest.raises(ConfigError, match=r"^eval_thresholds/max_regressions/regression_tolerance/eval_gate/"
                                          r"bootstrap_resamples/bootstrap_seed/slice_by/evaluate_options: "
                                          r"threshold 'accuracy>=0.5'"):
        compile_pipeline(tmp_path / "q.yaml", GOLDEN_IMAGE, params={**where, "eval_thresholds": '["accuracy>=0.5"]'})
    # Without an index readable here (a cluster's paths), the step options are still checked.
    with pytest.raises(ConfigError, match=r"^data_service/train_options: shardflow train: error: unknown option "
                                          r"--epohcs"):
        compile_pipeline(tmp_path / "r.yaml", GOLDEN_IMAGE, params={"train_options": '["--epohcs", "3"]'})
    assert not (tmp_path / "q.yaml").exists() and not (tmp_path / "r.yaml").exists()


def test_read_head_takes_the_header_and_first_rows_only(tmp_path: Path) -> None:
    index = tmp_path / "i.csv"
    index.write_text('\ufeffimage,label,\na.png,1,\n"b,\n"broken,2,\nc.png,3,\nd.png,4,\n' + "e.png,5,\n" * 10_000)
    header, rows = read_head(str(index), 3)
    assert header == ["image", "label"]  # the BOM and the unnamed empty column dropped, as ExampleGen does
    assert rows == [["a.png", "1"], ["c.png", "3"], ["d.png", "4"]]  # the malformed record skipped
