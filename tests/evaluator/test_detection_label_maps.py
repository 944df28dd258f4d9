"""The Evaluator scores a detector against its own label map: any ids (COCO's 3, 7, 12), read from the model's
label_map.pbtxt, and eval data or a baseline with another map refused in one line naming both.

The examples: the session's demo box set (ids 1, 2, 3) and a copy renumbered to 3, 7, 12
(detection_oracle.renumbered_examples); the models: oracles answering each example's stored boxes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from detection_oracle import export_oracle, renumbered_examples
from shardflow.cli import main as shardflow_main
from shardflow.core.box_schema import LabelMap
from shardflow.core.manifest import read_manifest
from shardflow.evaluator.config import EvaluationError
from shardflow.tasks.detection.scoring import to_class_ids

pytestmark = pytest.mark.pipeline
COCO_IDS = {1: 3, 2: 7, 3: 12}


@pytest.fixture(scope="module")
def sets(box_examples: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("label_maps")
    label_map = read_manifest(box_examples).extra["boxes"]["label_map"]
    names = sorted(label_map, key=label_map.get)
    coco = renumbered_examples(box_examples, root / "coco_ids", COCO_IDS)
    coco_map = {name: COCO_IDS[i] for name, i in label_map.items()}
    return {"root": root, "names": names, "plain": box_examples, "coco": coco, "coco_map": coco_map,
            "plain_model": export_oracle(root / "plain_model", names),
            "coco_model": export_oracle(root / "coco_model", names, label_map=coco_map)}


def _evaluate(sets: dict, model: Path, examples: Path, name: str, capsys: pytest.CaptureFixture,
              *flags: str) -> tuple[int, str]:
    capsys.readouterr()
    code = shardflow_main(["evaluate", "--model", str(model), "--examples", str(examples),
                           "--output", str(sets["root"] / name), *flags])
    return code, capsys.readouterr().err.strip()


def test_a_detector_serving_coco_ids_scores_its_boxes_as_its_classes(sets: dict, capsys) -> None:
    import json

    code, err = _evaluate(sets, sets["coco_model"], sets["coco"], "coco", capsys, "--threshold", "ap>=0.99")
    assert code == 0, err
    metrics = json.loads((sets["root"] / "coco" / "metrics.json").read_text())
    assert metrics["overall"]["ap"] == pytest.approx(1.0, abs=1e-3) and metrics["class_names"] == sets["names"]
    assert all(ap == pytest.approx(1.0, abs=1e-3) for ap in metrics["ap_per_class"].values())


@pytest.mark.parametrize("case", ["other_ids", "other_order"])
def test_eval_data_with_another_label_map_is_refused_in_one_line_naming_both(sets: dict, capsys, case: str) -> None:
    if case == "other_ids":  # the model serves 1, 2, 3; the data stores 3, 7, 12
        model, examples = sets["plain_model"], sets["coco"]
        data_map, model_map = LabelMap(sets["coco_map"]), LabelMap.of_names(sets["names"])
    else:  # the same three ids, the names in another order: every box would be scored as another class
        reordered = sets["names"][::-1]
        model, examples = export_oracle(sets["root"] / "reordered", reordered), sets["plain"]
        data_map, model_map = LabelMap.of_names(sets["names"]), LabelMap.of_names(reordered)
    code, err = _evaluate(sets, model, examples, f"refused_{case}", capsys)
    assert code == 1 and len(err.splitlines()) == 1, err
    assert f"label map {data_map.describe()}" in err and f"serves {model_map.describe()}" in err


def test_a_baseline_with_another_label_map_is_refused_naming_both(sets: dict, capsys) -> None:
    code, err = _evaluate(sets, sets["coco_model"], sets["coco"], "baseline", capsys,
                          "--baseline", str(sets["plain_model"]))
    assert code == 1 and len(err.splitlines()) == 1, err
    assert "not comparable" in err and LabelMap(sets["coco_map"]).describe() in err
    assert LabelMap.of_names(sets["names"]).describe() in err


def test_a_stored_id_outside_the_label_map_is_an_error_never_another_class() -> None:
    labels = LabelMap({"disc": 3, "square": 7, "triangle": 12})
    assert to_class_ids(np.array([12, 3, 7]), labels, "example 0").tolist() == [2, 0, 1]
    with pytest.raises(EvaluationError, match=r"example 4: label id 8 is not in the label map \{disc: 3"):
        to_class_ids(np.array([3, 8]), labels, "example 4")
