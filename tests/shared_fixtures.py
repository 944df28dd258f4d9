"""Session fixtures for what many tests read: data sets and pipeline runs, each built once per machine.

Under pytest-xdist every worker is a session of its own, so a plain session fixture would be built once
per worker. `build_once` is the pytest-xdist docs' recipe: the first worker to take the file lock
builds into a folder all workers share and records what it built (JSON); the others wait on the lock
and read the record. Without xdist it is a plain once-per-session build.

A test that continues from a shared run (reruns it, retrains it) copies nothing and changes nothing in
it: the runs that continue are part of the fixture, recorded in order (see `quadrant_history`).
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest
from filelock import FileLock

DONE = "built.json"


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """The folder every xdist worker of this run sees (the session's own folder without xdist)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def build_once(factory: pytest.TempPathFactory, name: str, build: Callable[[Path], dict[str, Any]]) -> dict[str, Any]:
    """`build(folder)`'s JSON record, built by the first caller on this machine and read by the others.

    A build that raised leaves no record, so the next caller builds again (and fails the same way)."""
    folder = shared_root(factory) / "shared" / name
    folder.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder) + ".lock"):
        record = folder / DONE
        if record.is_file():
            return json.loads(record.read_text())
        folder.mkdir(exist_ok=True)
        built = build(folder)
        partial = record.with_suffix(".partial")
        partial.write_text(json.dumps(built))
        os.replace(partial, record)  # whole or absent: a killed build is built again
        return built


def _write_demo(folder: Path) -> dict[str, Any]:
    from shardflow.demo_data import write_all

    write_all(str(folder))
    return {"root": str(folder)}


@pytest.fixture(scope="session")
def demo_data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`shardflow demo-data`'s folders (digits/, photos/, segmentation/, boxes/), written once. Read only."""
    return Path(build_once(tmp_path_factory, "demo-data", _write_demo)["root"])


@pytest.fixture(scope="session")
def digits_examples(demo_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """scikit-learn's 1,797 digits (train and eval) through ExampleGen, at least 2 train shards (so
    multi-worker and corruption tests have shards to split). Read only."""
    def build(folder: Path) -> dict[str, Any]:
        from shardflow.example_gen import ExampleGenConfig, IndexSpec
        from shardflow.example_gen import run as example_gen

        digits = demo_data / "digits"
        indexes = tuple(IndexSpec(str(digits / f"{split}.csv"), split) for split in ("train", "eval"))
        example_gen(ExampleGenConfig(indexes=indexes, data_root=str(digits), output=str(folder / "examples"),
                                     min_shards=2), echo=lambda _: None)
        return {"examples": str(folder / "examples")}

    return Path(build_once(tmp_path_factory, "digits-examples", build)["examples"])


def _near_duplicate_set(folder: Path) -> dict[str, Any]:
    from helpers_images import write_near_duplicate_set

    return {"root": str(folder), "planted": write_near_duplicate_set(folder)}


@pytest.fixture(scope="session")
def near_duplicate_set(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[str, str]]]:
    """Image files with altered copies across splits (`helpers_images.write_near_duplicate_set`): the
    data root (train.csv: 10 files, eval.csv: 4 altered copies of train files and 4 distinct files) and
    the planted (train path, eval path) pairs. Read only."""
    built = build_once(tmp_path_factory, "near-duplicate-set", _near_duplicate_set)
    return Path(built["root"]), [tuple(pair) for pair in built["planted"]]  # type: ignore[misc]


BOX_IMAGES = 300  # demo_boxes' shapes: 240 train and 60 eval images of 96 px, 0-5 boxes each


def _box_examples(folder: Path) -> dict[str, Any]:
    from shardflow.demo_boxes import write_boxes
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run

    data = folder / "boxes"
    write_boxes(data, count=BOX_IMAGES)
    indexes = tuple(IndexSpec(str(data / f"{split}.csv"), split) for split in ("train", "eval"))
    run(ExampleGenConfig(indexes=indexes, data_root=str(data), output=str(folder / "examples")), echo=lambda _: None)
    return {"data": str(data), "examples": str(folder / "examples")}


@pytest.fixture(scope="session")
def box_examples(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`demo_boxes.write_boxes` (BOX_IMAGES images, the AutoML CSV layout) through ExampleGen: the seven box
    features of role "boxes" and the label map. Its data (JPEGs, train.csv, eval.csv) is `<examples>/../boxes`.
    Read only."""
    return Path(build_once(tmp_path_factory, "box-examples", _box_examples)["examples"])


MASK_SIDE, MASK_TRAIN, MASK_EVAL = 128, 8, 96


def _mask_unet(folder: Path) -> dict[str, Any]:
    import csv

    from testkit.mask_data import NUM_CLASSES, ensure_masks
    from helpers_models import export_model
    from shardflow.core.model_info import ModelInfo
    from shardflow.example_gen import ExampleGenConfig, IndexSpec, run
    from shardflow.trainer.models import unet

    with open(ensure_masks(folder, MASK_TRAIN + MASK_EVAL, MASK_SIDE), newline="") as stream:
        header, *rows = list(csv.reader(stream))
    for split, chosen in (("train", rows[:MASK_TRAIN]), ("eval", rows[MASK_TRAIN:])):
        with open(folder / f"{split}.csv", "w", newline="") as out:
            csv.writer(out).writerows([header, *chosen])
    examples = folder / "examples"
    run(ExampleGenConfig(indexes=tuple(IndexSpec(str(folder / f"{s}.csv"), s) for s in ("train", "eval")),
                         data_root=str(folder), output=str(examples), channels=(("image", "rgb"),),
                         storage=(("image", "jpeg"), ("mask", "png"))), echo=lambda _: None)
    info = ModelInfo(task="segmentation", label="mask", num_classes=NUM_CLASSES,
                     class_names=[f"q{i}" for i in range(NUM_CLASSES)])
    model = export_model(unet("image", (MASK_SIDE, MASK_SIDE, 3), NUM_CLASSES), folder / "model", examples, "image", info)
    return {"examples": str(examples), "model": str(model)}


@pytest.fixture(scope="session")
def mask_unet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """ExampleGen output of 8 train and 96 eval 128-px photo crops with 4-class masks (stored JPEG and
    PNG, as users ingest them), and the Trainer's U-Net for it, untrained, exported. Read only."""
    built = build_once(tmp_path_factory, "mask-unet", _mask_unet)
    return Path(built["examples"]), Path(built["model"])


def _quadrant_history(folder: Path) -> dict[str, Any]:
    """Five runs into one run directory, as a scheduled job would make them:
    - first:  blessed and pushed as version 1;
    - again:  the identical rerun (every cacheable step reused, the Evaluator too: version 1, served now, was
              pushed from this candidate, so it is no baseline for it);
    - worse:  a cold start with a learning rate that wrecks the model (the regression gate refuses it);
    - edited: after one CSV row's label changed (every step runs again);
    - repointed: edited's identical rerun after another push (worse's model, pushed by another run without a gate:
                 another content is served, so the Evaluator runs again against it)."""
    import shutil

    from helpers_images import write_quadrant_set
    from shardflow.pipelines.local_run import LocalRunConfig, run_locally
    from shardflow.pusher import push_model

    data, out = folder / "data", folder / "out"
    write_quadrant_set(data, 80, seed=1)
    common = dict(index=(f"train={data}/train.csv", f"eval={data}/eval.csv"), data_root=str(data),
                  output=str(out), eval_thresholds=("accuracy>=0.2",))
    good = LocalRunConfig(**common, train_options=("--epochs", "8", "--batch-size", "16"))
    worse = LocalRunConfig(**common, warm_start="", no_cache=("train",),
                           train_options=("--epochs", "1", "--batch-size", "16", "--learning-rate", "3"))
    history: dict[str, Any] = {"out": str(out), "data": str(data), "runs": {}}
    for name, config in (("first", good), ("again", good), ("worse", worse), ("edited", good),
                         ("repointed", good)):
        if name == "repointed":  # the served model changes under an unchanged candidate: another run pushed
            other = folder / "other-model"  # served models are told apart by content: a copy of edited's would be it
            shutil.copytree(Path(history["runs"]["worse"]["outputs"]["model"]) / "model", other)
            history["pushed_between"] = push_model(str(other), str(out / "serving"), gated_against=None)[1]
        if name == "edited":
            rows = (data / "train.csv").read_text().splitlines()
            rows[1] = rows[1].rsplit(",", 1)[0] + ",3"  # one label changed
            (data / "train.csv").write_text("\n".join(rows) + "\n")
        printed: list[str] = []
        summary = run_locally(config, echo=printed.append)
        assert summary["outcome"]["state"] == "SUCCEEDED", printed
        history["runs"][name] = {**summary, "printed": printed, "bytes": _bytes(out),
                                 # what TF Serving sees: not Push's hidden claims and lock
                                 "served": sorted(p.name for p in (out / "serving").iterdir()
                                                  if not p.name.startswith("."))}
    return history


def _bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


@pytest.fixture(scope="session")
def quadrant_history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The six runs of `_quadrant_history` on 80 rows of the quadrant set: their summaries (with each
    step's state), what each printed, the run directory's bytes after each, and the served versions; and the
    version pushed before "repointed" (`pushed_between`)."""
    return build_once(tmp_path_factory, "quadrant-history", _quadrant_history)
