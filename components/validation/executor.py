"""Data validation's `run(config)`: ExampleGen's statistics and schema → anomalies, reports, pass or fail.

>>> from shardflow.validation import ValidationConfig, run                              # doctest: +SKIP
>>> result = run(ValidationConfig(examples="runs/examples", output="runs/validation"))  # doctest: +SKIP
>>> result.passed                                                                       # doctest: +SKIP
True

Outputs in `config.output` (a path or URI): report.md, report.html, anomalies.json (the completion
marker, written last through `OutputDir`), and tfdv/ with
the schema the checks ran with and TFDV's Anomalies per split (text protos, for tfdv.display_anomalies).
Anomalies raise DataValidationError after the reports are written, unless fail_on_anomalies is off.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from google.protobuf import text_format
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2

from ..core import storage
from ..core.errors import ConfigError
from ..core.manifest import MANIFEST_NAME, IncompleteOutputError, Manifest, read_manifest
from ..core.output_dir import OutputDir
from ..core.statistics_io import write_schema
from .anomalies import anomaly_records, drift_measurements
from .checks import load_schema, set_drift_comparators, validate_splits
from .config import SCHEMA_NAME, ValidationConfig
from .inputs import load_split_statistics
from .report import HTML_NAME, JSON_NAME, MARKDOWN_NAME, report_json, verdict, write_reports
from .result import DataValidationError, ValidationResult

TFDV_DIR = "tfdv"


def output_location(root: str) -> OutputDir:
    """Validation's output and what it owns there; anomalies.json is the completion marker."""
    return OutputDir(root, marker=JSON_NAME, owned=(TFDV_DIR, MARKDOWN_NAME, HTML_NAME))


def check_inputs(config: ValidationConfig) -> Manifest:
    """The checks that read files, before anything is written: complete examples, baseline split, schema."""
    try:
        manifest = read_manifest(config.examples)
    except IncompleteOutputError:
        raise ConfigError(f"examples {config.examples!r} has no {MANIFEST_NAME}: "
                          "not a complete ExampleGen output") from None
    if config.baseline_split not in manifest.splits:
        raise ConfigError(f"baseline_split {config.baseline_split!r} is not a split of {config.examples!r} "
                          f"(has {sorted(manifest.splits)})")
    if not storage.is_file(config.schema_path):
        if config.schema is not None:
            raise ConfigError(f"schema {config.schema!r} is not a file")
        raise ConfigError(f"examples {config.examples!r} has no {SCHEMA_NAME}: pass a schema")
    return manifest


def _write_protos(out: OutputDir, schema: schema_pb2.Schema, found: dict[str, anomalies_pb2.Anomalies]) -> None:
    """The effective schema and the raw Anomalies, so TFDV's own tools can display them."""
    target = out.staged(TFDV_DIR)
    write_schema(schema, storage.join(target, SCHEMA_NAME))
    for split, anomalies in found.items():
        storage.write_text(storage.join(target, f"anomalies_{split}.pbtxt"), text_format.MessageToString(anomalies))


def check(config: ValidationConfig, manifest: Manifest, out: OutputDir) -> ValidationResult:
    """Runs the checks on every split; stages the TFDV protos; returns the plain result (no reports yet)."""
    stats = load_split_statistics(config.examples, manifest, config.baseline_split)
    schema = load_schema(config.schema_path)
    files = [name for name, feature in manifest.features.items() if feature.is_file]
    comparators = set_drift_comparators(schema, files, float(config.drift_threshold), config.drift_exclude)
    found = validate_splits(stats, schema, config.baseline_split)
    _write_protos(out, schema, found)
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
    """Validates every split; writes the reports; raises DataValidationError on anomalies if asked to.

    The earlier verdict (anomalies.json) is removed first, so a failed run never leaves one behind.
    """
    manifest = check_inputs(config)
    out = output_location(config.output)
    with out.staged_run():
        result = check(config, manifest, out)
        result = dataclasses.replace(result, reports=write_reports(result, out))
        out.publish([TFDV_DIR, MARKDOWN_NAME, HTML_NAME])
        out.mark_complete(report_json(result, config.examples, config.schema_path))
    echo(f"validate: {verdict(result)}")
    if result.passed:
        return result
    if config.fail_on_anomalies:
        raise DataValidationError(result)
    echo(f"WARNING: data validation found {len(result.anomalies)} anomalies (warn-only, not failing):\n"
         f"{result.summary()}\nWARNING: report: {result.reports['markdown']}")
    return result
