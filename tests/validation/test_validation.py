"""Data validation on real ExampleGen outputs: clean data passes; a missing feature, drift, unseen labels,
out-of-range ints and type mismatches fail with a report naming them; --warn-only; CLI exit codes.

One set of 40 8x8 PNGs backs three ExampleGen runs (once per module each): `clean` (eval distributed
like train), `drifted` (eval labels all "cat", eval scores shifted) and `unseen` (two eval labels
"fish", one eval grade 9, and an empty `holdout` split). Columns: image, label, grade (int),
score (float), site (string), batch (a constant int).
"""
from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import schema_pb2, statistics_pb2

from shardflow.example_gen import ExampleGenConfig, IndexSpec
from shardflow.example_gen import run as example_gen
from shardflow.validation import ConfigError, DataValidationError, ValidationConfig, ValidationResult, run
from shardflow.cli import main as shardflow_main
from shardflow.validation.inputs import StatisticsMismatchError

from helpers_images import write_csv, write_png

TRAIN, EVAL = 32, 8
WORDS = ["cat", "dog", "bird", "cow"]
HEADER = ["image", "label", "grade", "score", "site", "batch"]


def _row(i: int, label: str | None = None, grade: int | None = None, shift: float = 0.0) -> list[object]:
    """Row i of the clean data: every column cycles so that eval (rows 32..39) mirrors train exactly."""
    return [f"img/{i}.png", label or WORDS[i % 4], i % 4 if grade is None else grade, (i % 8) * 0.5 + shift,
            f"site-{'ab'[i % 2]}", 1]


@pytest.fixture(scope="module")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root, rng = tmp_path_factory.mktemp("images"), np.random.default_rng(11)
    for i in range(TRAIN + EVAL):
        write_png(root / f"img/{i}.png", rng.integers(0, 256, size=(8, 8, 1), dtype=np.uint8))
    return root


def _example_gen(root: Path, name: str, splits: dict[str, list[list[object]]]) -> Path:
    for split, rows in splits.items():
        write_csv(root / f"{name}_{split}.csv", HEADER, rows)
    indexes = tuple(IndexSpec(str(root / f"{name}_{split}.csv"), split) for split in splits)
    out = root.parent / f"{root.name}_{name}"
    example_gen(ExampleGenConfig(indexes=indexes, data_root=str(root), output=str(out)), echo=lambda _: None)
    return out


@pytest.fixture(scope="module")
def clean(data_root: Path) -> Path:
    return _example_gen(data_root, "clean", {"train": [_row(i) for i in range(TRAIN)],
                                             "eval": [_row(i) for i in range(TRAIN, TRAIN + EVAL)]})


@pytest.fixture(scope="module")
def drifted(data_root: Path) -> Path:
    """Eval labels all "cat" (L-infinity 0.75 from train's uniform four) and eval scores shifted by +1."""
    return _example_gen(data_root, "drifted", {"train": [_row(i) for i in range(TRAIN)],
                                               "eval": [_row(i, "cat", shift=1.0) for i in range(TRAIN, TRAIN + EVAL)]})


@pytest.fixture(scope="module")
def unseen(data_root: Path) -> Path:
    """Eval rows 38 and 39 are labelled "fish" (never in train), row 39 has grade 9; holdout is empty."""
    eval_rows = [_row(i, "fish" if i >= 38 else None, 9 if i == 39 else None) for i in range(TRAIN, TRAIN + EVAL)]
    return _example_gen(data_root, "unseen", {"train": [_row(i) for i in range(TRAIN)], "eval": eval_rows,
                                              "holdout": []})


def _found(result: ValidationResult) -> set[tuple[str, str, str]]:
    return {(a.split, a.feature, a.kind) for a in result.anomalies}


def _json(out: Path) -> dict:
    return json.loads((out / "anomalies.json").read_text())


def _cli(argv: list[str]) -> int:
    return shardflow_main(["validate", *argv])


def test_clean_examples_pass_with_no_anomalies(clean: Path, tmp_path: Path) -> None:
    result = run(ValidationConfig(examples=str(clean), output=str(tmp_path)), echo=lambda _: None)
    assert result.passed and result.anomalies == ()
    assert result.splits == {"train": TRAIN, "eval": EVAL}
    # Every value feature was compared (the constant `batch` too), the image was not (placeholder stats).
    assert {d.feature for d in result.drift} == {"label", "grade", "score", "site", "batch"}
    assert all(d.split == "eval" and d.value < 1e-6 and d.threshold == 0.1 for d in result.drift)
    assert "skipped" in result.comparators["image"]
    assert result.comparators["label"]["measure"] == "L_INFTY"
    assert result.comparators["score"]["measure"] == "JENSEN_SHANNON_DIVERGENCE"
    report = _json(tmp_path)
    assert report["passed"] is True and report["num_anomalies"] == 0
    assert report["splits"]["eval"]["anomalies"] == [] and report["thresholds"]["drift_threshold"] == 0.1
    assert "**PASSED: no anomalies in train, eval" in (tmp_path / "report.md").read_text()
    assert "PASSED" in (tmp_path / "report.html").read_text()
    assert sorted(p.name for p in (tmp_path / "tfdv").iterdir()) == [
        "anomalies_eval.pbtxt", "anomalies_train.pbtxt", "schema.pbtxt"]


def test_eval_missing_a_feature_fails_and_the_report_names_it(clean: Path, tmp_path: Path) -> None:
    # ExampleGen refuses an eval index whose header lacks a column, so eval's statistics lose `site`
    # afterwards: TFDV lists only features some example has, so this is exactly the statistics
    # TFDV computes on eval examples without the column.
    examples = shutil.copytree(clean, tmp_path / "examples")
    path = examples / "statistics" / "eval.pb"
    stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())
    kept = [f for f in stats.datasets[0].features if list(f.path.step) != ["site"]]
    assert len(kept) == len(stats.datasets[0].features) - 1
    del stats.datasets[0].features[:]
    stats.datasets[0].features.extend(kept)
    path.write_bytes(stats.SerializeToString())

    out = tmp_path / "validation"
    with pytest.raises(DataValidationError) as failure:
        run(ValidationConfig(examples=str(examples), output=str(out)), echo=lambda _: None)
    assert _found(failure.value.result) == {("eval", "site", "missing_feature")}
    message = str(failure.value)
    assert "1 anomaly" in message and "eval/site: Column dropped" in message and str(out / "report.md") in message
    report = _json(out)
    assert report["passed"] is False and report["splits"]["train"]["anomalies"] == []
    assert [(a["feature"], a["reason"]) for a in report["splits"]["eval"]["anomalies"]] == [
        ("site", "SCHEMA_MISSING_COLUMN")]
    markdown = (out / "report.md").read_text()
    assert "FAILED: 1 anomaly in eval/site" in markdown and "| site | missing_feature | Column dropped |" in markdown


def test_drift_beyond_the_threshold_names_the_features_and_a_higher_threshold_passes(drifted: Path,
                                                                                      tmp_path: Path) -> None:
    with pytest.raises(DataValidationError) as failure:
        run(ValidationConfig(examples=str(drifted), output=str(tmp_path / "strict")), echo=lambda _: None)
    result = failure.value.result
    assert _found(result) == {("eval", "label", "drift"), ("eval", "score", "drift")}
    measured = {d.feature: d for d in result.drift}
    assert measured["label"].measure == "L_INFTY" and math.isclose(measured["label"].value, 0.75)
    assert measured["score"].measure == "JENSEN_SHANNON_DIVERGENCE" and 0.1 < measured["score"].value < 0.9
    assert not measured["grade"].exceeded and not measured["site"].exceeded

    loose = run(ValidationConfig(examples=str(drifted), output=str(tmp_path / "loose"), drift_threshold=0.9),
                echo=lambda _: None)
    assert loose.passed and {d.threshold for d in loose.drift} == {0.9}
    excluded = run(ValidationConfig(examples=str(drifted), output=str(tmp_path / "excluded"),
                                    drift_exclude=("label", "score")), echo=lambda _: None)
    assert excluded.passed and {d.feature for d in excluded.drift} == {"grade", "site", "batch"}


def test_unseen_label_is_out_of_domain_and_an_empty_split_fails(unseen: Path, tmp_path: Path) -> None:
    config = ValidationConfig(examples=str(unseen), output=str(tmp_path), fail_on_anomalies=False)
    lines: list[str] = []
    result = run(config, echo=lines.append)
    assert not result.passed and result.splits == {"train": TRAIN, "eval": EVAL, "holdout": 0}
    assert ("eval", "label", "out_of_domain") in _found(result)
    assert ("holdout", "(dataset)", "empty_split") in _found(result)
    assert not [a for a in result.anomalies if a.split == "train"]
    domain = next(a for a in result.anomalies if a.kind == "out_of_domain")
    assert domain.reason == "ENUM_TYPE_UNEXPECTED_STRING_VALUES" and "fish" in domain.description
    # The inferred schema has no int domain: grade 9 shows only as drift, not as out of range.
    assert ("eval", "grade", "out_of_domain") not in _found(result)
    assert any(line.startswith("WARNING") and "eval/label" in line for line in lines)


def test_curated_schema_flags_int_out_of_range_and_type_mismatch(unseen: Path, tmp_path: Path) -> None:
    schema = tfdv.load_schema_text(str(unseen / "schema.pbtxt"))
    tfdv.get_feature(schema, "grade").int_domain.max = 3
    site = tfdv.get_feature(schema, "site")  # as if an earlier dataset had integer site ids
    site.ClearField("domain")
    site.type = schema_pb2.INT
    tfdv.get_feature(schema, "label").drift_comparator.infinity_norm.threshold = 0.5  # the schema's own wins
    tfdv.get_feature(schema, "image").image_domain.max_image_byte_size = 32  # raw 8x8 gray images: 64 bytes
    curated = tmp_path / "curated.pbtxt"
    tfdv.write_schema_text(schema, str(curated))

    result = run(ValidationConfig(examples=str(unseen), output=str(tmp_path / "out"), schema=str(curated),
                                  fail_on_anomalies=False), echo=lambda _: None)
    found = _found(result)
    assert {("eval", "grade", "out_of_domain"), ("train", "site", "type_mismatch"), ("eval", "site", "type_mismatch"),
            ("train", "image", "out_of_domain"), ("eval", "image", "out_of_domain")} <= found
    assert ("train", "grade", "out_of_domain") not in found
    grade = next(a for a in result.anomalies if (a.split, a.feature, a.kind) == ("eval", "grade", "out_of_domain"))
    assert grade.reason == "INT_TYPE_BIG_INT" and "9" in grade.description
    image = next(a for a in result.anomalies if (a.split, a.feature) == ("train", "image"))
    assert image.reason == "MAX_IMAGE_BYTE_SIZE_EXCEEDED" and "64" in image.description  # real payload sizes
    assert result.comparators["label"] == {"measure": "L_INFTY", "threshold": 0.5, "source": "schema"}
    assert not any(a.kind == "drift" and a.feature == "label" for a in result.anomalies)  # 0.25 < 0.5


def test_statistics_that_do_not_match_the_manifest_are_refused(clean: Path, tmp_path: Path) -> None:
    examples = shutil.copytree(clean, tmp_path / "examples")
    path = examples / "statistics" / "eval.pb"
    stats = statistics_pb2.DatasetFeatureStatisticsList.FromString(path.read_bytes())
    stats.datasets[0].num_examples = 99
    path.write_bytes(stats.SerializeToString())
    with pytest.raises(StatisticsMismatchError, match=r"eval\.pb counts 99 examples, the manifest lists 8"):
        run(ValidationConfig(examples=str(examples), output=str(tmp_path / "out")), echo=lambda _: None)
    assert not (tmp_path / "out" / "anomalies.json").exists()


def test_cli_warn_only_exits_0_and_still_reports_the_anomaly(drifted: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["--examples", str(drifted), "--output", str(tmp_path), "--warn-only"]) == 0
    assert "WARNING: data validation found 2 anomalies" in capsys.readouterr().out
    report = _json(tmp_path)
    assert report["passed"] is False and report["fail_on_anomalies"] is False
    assert {a["feature"] for a in report["splits"]["eval"]["anomalies"]} == {"label", "score"}
    assert "warn-only: the run continues" in (tmp_path / "report.md").read_text()


def test_cli_exit_codes(clean: Path, drifted: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert _cli(["--examples", str(clean), "--output", str(tmp_path / "clean")]) == 0
    assert _cli(["--examples", str(drifted), "--output", str(tmp_path / "drifted")]) == 1
    err = capsys.readouterr().err
    assert "eval/label" in err and str(tmp_path / "drifted" / "report.md") in err
    assert _cli(["--examples", str(drifted), "--output", str(tmp_path / "x"), "--drift-threshold", "1.5"]) == 2
    assert "drift_threshold must be a number in (0, 1], got 1.5" in capsys.readouterr().err
    assert _cli(["--examples", str(clean), "--output", str(tmp_path / "x"), "--no-drift", "nope"]) == 2
    assert "drift_exclude names ['nope']" in capsys.readouterr().err


@pytest.mark.parametrize("options, message", [
    ({"drift_threshold": 0.0}, "drift_threshold must be a number in (0, 1], got 0.0"),
    ({"drift_threshold": float("nan")}, "got nan"),
    ({"drift_threshold": True}, "got True"),
    ({"baseline_split": "test"}, "baseline_split 'test' is not a split"),
    ({"schema": "/no/such/schema.pbtxt"}, "schema '/no/such/schema.pbtxt' is not a file"),
    ({"drift_exclude": "label"}, "drift_exclude must be a tuple of feature names, got 'label'"),
    ({"fail_on_anomalies": "no"}, "fail_on_anomalies must be True or False, got 'no'"),
])
def test_config_errors_name_the_bad_value(clean: Path, tmp_path: Path, options: dict, message: str) -> None:
    # Value checks fail in the config, file checks (split names, schema file) when run() starts.
    with pytest.raises(ConfigError, match=re.escape(message)):
        run(ValidationConfig(examples=str(clean), output=str(tmp_path / "out"), **options), echo=lambda _: None)
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_config_refuses_incomplete_examples_and_overlapping_output(clean: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match="has no manifest.json"):
        run(ValidationConfig(examples=str(tmp_path / "empty"), output=str(tmp_path / "out")), echo=lambda _: None)
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError, match="must be a directory apart from examples"):
        ValidationConfig(examples=str(clean), output=str(clean / "validation"))
