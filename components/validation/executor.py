"""Data validation's `run(config)`: ExampleGen's statistics and schema → anomalies, reports, pass or fail.

>>> from shardflow.validation import ValidationConfig, run                              # doctest: +SKIP
>>> result = run(ValidationConfig(examples="runs/examples", output="runs/validation"))  # doctest: +SKIP
>>> result.passed                                                                       # doctest: +SKIP
True

Outputs in `config.output`: report.md, report.html, anomalies.json (written last), and tfdv/ with
the schema the checks ran with and TFDV's Anomalies per split (text protos, for tfdv.display_anomalies).
Anomalies raise DataValidationError after the reports are written, unless fail_on_anomalies is off.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Callable

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

from ..core import storage
from ..core.manifest import read_manifest
from .anomalies import anomaly_records, drift_measurements
from .checks import load_schema, set_drift_comparators, validate_splits
from .config import ValidationConfig
from .inputs import load_split_statistics
from .report import JSON_NAME, verdict, write_reports
from .result import DataValidationError, ValidationResult

TFDV_DIR = "tfdv"


def _write_protos(out_dir: Path, schema: schema_pb2.Schema, found: dict[str, anomalies_pb2.Anomalies]) -> None:
    """The effective schema and the raw Anomalies, so TFDV's own tools can display them."""
    target = out_dir / TFDV_DIR
    storage.remove(target)  # no Anomalies of a split from an earlier run may survive
    storage.write_text(target / "schema.pbtxt", text_format.MessageToString(schema))
    for split, anomalies in found.items():
        storage.write_text(target / f"anomalies_{split}.pbtxt", text_format.MessageToString(anomalies))


def check(config: ValidationConfig, out_dir: Path) -> ValidationResult:
    """Runs the checks on every split; writes the TFDV protos; returns the plain result (no reports yet)."""
    manifest = read_manifest(config.examples)
    stats = load_split_statistics(config.examples, manifest, config.baseline_split)
    schema = load_schema(str(config.schema_path))
    files = [name for name, feature in manifest.features.items() if feature.is_file]
    comparators = set_drift_comparators(schema, files, float(config.drift_threshold), config.drift_exclude)
    found = validate_splits(stats, schema, config.baseline_split)
    _write_protos(out_dir, schema, found)
    return ValidationResult(
        splits={split: manifest.splits[split].num_examples for split in stats},
        baseline_split=config.baseline_split,
        anomalies=tuple(a for split, anomalies in found.items() for a in anomaly_records(split, anomalies)),
        drift=tuple(d for split, anomalies in found.items() for d in drift_measurements(split, anomalies)),
        comparators=comparators,
        drift_threshold=float(config.drift_threshold),
        fail_on_anomalies=config.fail_on_anomalies,
    )


def run(config: ValidationConfig, echo: Callable[[str], None] = print) -> ValidationResult:
    """Validates every split; writes the reports; raises DataValidationError on anomalies if asked to."""
    out_dir = Path(config.output)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / JSON_NAME).unlink(missing_ok=True)  # a failed run must not leave an earlier verdict behind
    result = check(config, out_dir)
    result = dataclasses.replace(result, reports=write_reports(result, out_dir, config.examples,
                                                                str(config.schema_path)))
    echo(f"validate: {verdict(result)}")
    if result.passed:
        return result
    if config.fail_on_anomalies:
        raise DataValidationError(result)
    echo(f"WARNING: data validation found {len(result.anomalies)} anomalies (warn-only, not failing):\n"
         f"{result.summary()}\nWARNING: report: {result.reports['markdown']}")
    return result
