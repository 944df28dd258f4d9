"""The checks: the schema from train plus a drift comparator per feature, run by TFDV on every split.

    schema = load_schema("runs/examples/schema.pbtxt")
    comparators = set_drift_comparators(schema, file_features={"image"}, threshold=0.1, exclude=())
    anomalies = validate_splits({"train": train_stats, "eval": eval_stats}, schema, baseline="train")

The baseline split is checked against the schema alone; every other split against the schema and,
for drift, against the baseline's statistics. Image and mask features carry placeholder statistics
(ExampleGen records one empty value and the real payload sizes per example, never the pixels), so
they get no drift comparator; presence, shape and a curated `image_domain.max_image_byte_size` are
still checked.
"""
from __future__ import annotations

from typing import Any, Iterable

import tensorflow_data_validation as tfdv
from tensorflow_metadata.proto.v0 import anomalies_pb2, schema_pb2, statistics_pb2

from ..core.errors import ConfigError
from ..core.statistics_io import UnreadableProtoError, read_schema

L_INFTY = "L_INFTY"
JENSEN_SHANNON = "JENSEN_SHANNON_DIVERGENCE"
_STRING_DOMAINS = ("domain", "string_domain")


def load_schema(location: str) -> schema_pb2.Schema:
    """The schema at `location` (path or URI); a missing or unreadable file is the user's ConfigError."""
    try:
        return read_schema(location)
    except FileNotFoundError:
        raise ConfigError(f"schema {location!r} is not a file") from None
    except UnreadableProtoError as err:
        raise ConfigError(f"schema {location!r}: {err}") from None


def _curated_comparator(feature: schema_pb2.Feature) -> dict[str, Any]:
    comparator = feature.drift_comparator
    if comparator.HasField("infinity_norm"):
        return {"measure": L_INFTY, "threshold": comparator.infinity_norm.threshold, "source": "schema"}
    if comparator.HasField("jensen_shannon_divergence"):
        return {"measure": JENSEN_SHANNON, "threshold": comparator.jensen_shannon_divergence.threshold,
                "source": "schema"}
    return {"measure": "NORMALIZED_ABSOLUTE_DIFFERENCE", "threshold": comparator.normalized_abs_difference.threshold,
            "source": "schema"}


def _comparator_for(feature: schema_pb2.Feature, threshold: float) -> dict[str, Any]:
    """Sets the default comparator on a feature that has none; returns what it is checked with."""
    if feature.HasField("drift_comparator"):
        return _curated_comparator(feature)
    if feature.type == schema_pb2.BYTES and feature.WhichOneof("domain_info") in _STRING_DOMAINS:
        feature.drift_comparator.infinity_norm.threshold = threshold
        return {"measure": L_INFTY, "threshold": threshold, "source": "drift_threshold"}
    if feature.type in (schema_pb2.INT, schema_pb2.FLOAT):
        feature.drift_comparator.jensen_shannon_divergence.threshold = threshold
        return {"measure": JENSEN_SHANNON, "threshold": threshold, "source": "drift_threshold"}
    return {"skipped": "string feature without a domain (free text or ids): no distribution to compare"}


def set_drift_comparators(schema: schema_pb2.Schema, file_features: Iterable[str], threshold: float,
                          exclude: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Puts a comparator on each comparable feature (in place); returns feature -> comparator or skip reason."""
    files, excluded = set(file_features), set(exclude)
    unknown = excluded - {f.name for f in schema.feature}
    if unknown:
        raise ConfigError(f"drift_exclude names {sorted(unknown)}, not features of the schema "
                          f"(has {sorted(f.name for f in schema.feature)})")
    comparators = {}
    for feature in schema.feature:
        if feature.name in files:
            feature.ClearField("drift_comparator")  # placeholder statistics: nothing to compare
            comparators[feature.name] = {"skipped": "image/mask file: statistics hold payload sizes only "
                                                    "(ExampleGen already decoded every file)"}
        elif feature.name in excluded:
            feature.ClearField("drift_comparator")
            comparators[feature.name] = {"skipped": "excluded by drift_exclude"}
        else:
            comparators[feature.name] = _comparator_for(feature, threshold)
    return comparators


def validate_splits(stats: dict[str, statistics_pb2.DatasetFeatureStatisticsList], schema: schema_pb2.Schema,
                    baseline: str) -> dict[str, anomalies_pb2.Anomalies]:
    """TFDV's anomalies per split: the baseline against the schema, the others also against the baseline."""
    return {
        split: tfdv.validate_statistics(split_stats, schema,
                                        previous_statistics=None if split == baseline else stats[baseline])
        for split, split_stats in stats.items()
    }
