"""`shardflow predict` on real files and real SavedModels: every row predicted or rejected, predictions equal
the served model's own, reruns, bad inputs, Dask.

The data, model and predict run are tests/helpers_predict.py's "bands": 8x8 gray images whose bright row
band is the class, a prediction index with a corrupt, a missing and a wrong-shaped file. Tolerance: 1e-5
on probabilities for PNG rows (the same graph on the same pixels); 0.01 for JPEG rows (ExampleGen's JPEG
decoder may differ from Pillow's by a level). Other inputs and outputs (serving dirs, --examples,
Parquet and PredictionLog, masks) are in test_predict_outputs.py.
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers_images import read_pixels, write_csv
from helpers_predict import NEW_ROWS, QUIET, assert_same_table, bands, bands_run  # noqa: F401
from helpers_predict import serving_default as _serving_default
from helpers_predict import table as _table
from shardflow.cli import main as shardflow_main
from shardflow.core.errors import ConfigError
from shardflow.predict import PredictConfig, run

BAD = {"corrupt.png": "corrupt_image", "missing.png": "missing_file", "big.png": "wrong_shape"}


def _index_rows(index: Path) -> list[list[str]]:
    with open(index, newline="") as stream:
        return list(csv.reader(stream))[1:]


def test_every_row_is_predicted_or_rejected_with_its_reason(bands: dict[str, Path], bands_run: tuple[dict, Path]) -> None:
    summary, out = bands_run
    index_rows = _index_rows(bands["index"])
    assert summary["rows"] == len(index_rows) == NEW_ROWS + len(BAD)
    assert summary["predicted"] == NEW_ROWS and summary["rejected"] == len(BAD)
    assert summary["rejected_by_reason"] == {code: 1 for code in BAD.values()}
    assert json.loads((out / "predict.json").read_text()) == summary
    rejects = [json.loads(line) for line in (out / "rejects.jsonl").read_text().splitlines()]
    assert {r["path"]: r["code"] for r in rejects} == {f"new/{n}": c for n, c in BAD.items()}
    for reject in rejects:
        assert index_rows[reject["row"] - 1][1] == reject["path"]  # the row number is the index's data row
        assert reject["index"] == str(bands["index"]) and reject["column"] == "x" and reject["reason"]
    assert "differs from the column's (8, 8, 1)" in next(r["reason"] for r in rejects if r["code"] == "wrong_shape")
    table = _table(out)
    predicted_rows = {int(r["row"]) for r in table}
    assert len(table) == len(predicted_rows) == NEW_ROWS
    assert predicted_rows | {r["row"] for r in rejects} == set(range(1, len(index_rows) + 1))
    for row in table:
        assert row["path"] == index_rows[int(row["row"]) - 1][1] and row["index"] == str(bands["index"])


def test_predictions_equal_the_served_models_own(bands: dict[str, Path], bands_run: tuple[dict, Path]) -> None:
    _, out = bands_run
    table = sorted(_table(out), key=lambda r: int(r["row"]))
    expected = _serving_default(bands["model"], "x", [read_pixels(bands["root"] / r["path"]) for r in table])
    names = ["low", "mid", "high"]
    for row, probabilities, class_id in zip(table, expected["probabilities"], expected["class_ids"]):
        tolerance = 1e-5 if row["path"].endswith(".png") else 0.01
        top = np.argsort(-probabilities, kind="stable")[:2]
        assert int(row["class_id"]) == class_id and row["class_name"] == names[class_id]
        assert float(row["score"]) == pytest.approx(probabilities[class_id], abs=tolerance)
        assert json.loads(row["top_k_ids"]) == top.tolist()
        assert json.loads(row["top_k_names"]) == [names[i] for i in top]
        assert json.loads(row["top_k_scores"]) == pytest.approx(probabilities[top].tolist(), abs=tolerance)
    assert len({int(r["class_id"]) for r in table}) == 3  # the checks above saw every class


def test_a_rerun_over_a_killed_run_gives_the_same_result(bands: dict[str, Path], bands_run: tuple[dict, Path],
                                                         tmp_path: Path) -> None:
    out = tmp_path / "preds"
    shutil.copytree(bands_run[1], out)
    # What a run killed midway leaves: the marker gone, staged parts and scratch files, stale items.
    (out / "predict.json").unlink()
    (out / ".staging" / "parts").mkdir(parents=True)
    (out / ".staging" / "parts" / "deadbeef.csv").write_text("index,row\nx,1\n")
    (out / "predictions" / "part-00999.csv").write_text((out / "predictions" / "part-00000.csv").read_text())
    config = PredictConfig(model=str(bands["model"]), output=str(out), index=str(bands["index"]),
                           data_root=str(bands["root"]), top_k=2, rows_per_chunk=3)
    summary = run(config, **QUIET)
    assert_same_table(_table(out), _table(bands_run[1]))
    assert (out / "rejects.jsonl").read_text() == (bands_run[1] / "rejects.jsonl").read_text()
    assert not (out / ".staging").exists() and not (out / "predictions" / "part-00999.csv").exists()
    assert {k: summary[k] for k in ("rows", "predicted", "rejected")} == {"rows": 17, "predicted": 14, "rejected": 3}


def test_bad_models_and_inputs_are_config_errors(bands: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="neither shardflow_model.json nor CURRENT.json"):
        PredictConfig(model=str(tmp_path), output=str(tmp_path / "o"), examples=str(bands["examples"])).check_inputs()
    write_csv(tmp_path / "other.csv", ["image"], [["new/0.png"]])
    with pytest.raises(ConfigError, match="no column 'x'"):
        run(PredictConfig(model=str(bands["model"]), output=str(tmp_path / "o"), index=str(tmp_path / "other.csv"),
                          data_root=str(bands["root"])), **QUIET)
    assert not (tmp_path / "o" / "predict.json").exists()


def test_dask_runner_gives_the_local_runners_predictions(bands: dict[str, Path], bands_run: tuple[dict, Path],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 2-worker Dask LocalCluster: the same rows, rejects and predictions as the local runner."""
    import dask
    from dask.distributed import Client, LocalCluster

    monkeypatch.setenv("DASK_TEMPORARY_DIRECTORY", str(tmp_path / "dask"))
    with dask.config.set({"temporary-directory": str(tmp_path / "dask")}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        try:
            out = tmp_path / "dask_preds"
            assert shardflow_main(["predict", "--model", str(bands["model"]), "--index", str(bands["index"]),
                                   "--data-root", str(bands["root"]), "--output", str(out), "--top-k", "2",
                                   "--rows-per-chunk", "4", "--runner=apache_beam.runners.dask.dask_runner.DaskRunner",
                                   f"--dask_client_address={cluster.scheduler_address}"]) == 0
        finally:
            client.close()
            cluster.close()
    summary = json.loads((out / "predict.json").read_text())
    assert "DaskRunner" in summary["runner"] and summary["predicted"] == NEW_ROWS
    key = lambda r: int(r["row"])  # noqa: E731
    mine, local = sorted(_table(out), key=key), sorted(_table(bands_run[1]), key=key)
    assert [(r["row"], r["path"], r["class_id"]) for r in mine] == [(r["row"], r["path"], r["class_id"]) for r in local]
    for a, b in zip(mine, local):
        assert float(a["score"]) == pytest.approx(float(b["score"]), abs=1e-6)
    assert (out / "rejects.jsonl").read_text() == (bands_run[1] / "rejects.jsonl").read_text()
