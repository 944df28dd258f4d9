"""TFDV's Anomalies protos → plain `Anomaly` and `DriftMeasurement` records, sorted and classified.

    records = anomaly_records("eval", tfdv.validate_statistics(eval_stats, schema, previous_statistics=train))
    [a.kind for a in records]          # ['missing_feature', 'drift']
    kind_of("ENUM_TYPE_UNEXPECTED_STRING_VALUES")   # 'out_of_domain'
"""
from __future__ import annotations

from tensorflow_metadata.proto.v0 import anomalies_pb2

from .result import DATASET, KINDS, Anomaly, DriftMeasurement

_Type = anomalies_pb2.AnomalyInfo.Type

# TFDV reason types per kind; a reason in none of them is "other".
_REASONS_BY_KIND = {
    "missing_feature": {"SCHEMA_MISSING_COLUMN", "FEATURE_TYPE_NOT_PRESENT", "FEATURE_TYPE_LOW_FRACTION_PRESENT",
                        "FEATURE_TYPE_LOW_NUMBER_PRESENT", "FEATURE_TYPE_NO_VALUES",
                        "COMPARATOR_CONTROL_DATA_MISSING", "COMPARATOR_TREATMENT_DATA_MISSING"},
    "drift": {"COMPARATOR_L_INFTY_HIGH", "COMPARATOR_JENSEN_SHANNON_DIVERGENCE_HIGH",
              "COMPARATOR_NORMALIZED_ABSOLUTE_DIFFERENCE_HIGH"},
    "out_of_domain": {"ENUM_TYPE_UNEXPECTED_STRING_VALUES", "INT_TYPE_BIG_INT", "INT_TYPE_SMALL_INT",
                      "FLOAT_TYPE_BIG_FLOAT", "FLOAT_TYPE_SMALL_FLOAT", "FLOAT_TYPE_HAS_NAN", "FLOAT_TYPE_HAS_INF",
                      "BOOL_TYPE_BIG_INT", "BOOL_TYPE_SMALL_INT", "BOOL_TYPE_UNEXPECTED_STRING",
                      "BOOL_TYPE_UNEXPECTED_FLOAT", "MAX_IMAGE_BYTE_SIZE_EXCEEDED", "LOW_SUPPORTED_IMAGE_FRACTION",
                      "FEATURE_TYPE_HIGH_UNIQUE", "FEATURE_TYPE_LOW_UNIQUE", "FEATURE_TYPE_NO_UNIQUE"},
    "type_mismatch": {"UNEXPECTED_DATA_TYPE", "STRING_TYPE_NOW_FLOAT", "STRING_TYPE_NOW_INT",
                      "INT_TYPE_INT_EXPECTED", "INT_TYPE_STRING_EXPECTED", "INT_TYPE_NOT_INT_STRING",
                      "INT_TYPE_NOT_STRING", "INT_TYPE_UNKNOWN_TYPE_NUMBER", "FLOAT_TYPE_NOT_FLOAT",
                      "FLOAT_TYPE_STRING_NOT_FLOAT", "FLOAT_TYPE_NON_STRING", "FLOAT_TYPE_UNKNOWN_TYPE_NUMBER",
                      "ENUM_TYPE_BYTES_NOT_STRING", "ENUM_TYPE_FLOAT_NOT_STRING", "ENUM_TYPE_INT_NOT_STRING",
                      "ENUM_TYPE_INVALID_UTF8", "BOOL_TYPE_BYTES_NOT_INT", "BOOL_TYPE_BYTES_NOT_STRING",
                      "BOOL_TYPE_FLOAT_NOT_INT", "BOOL_TYPE_FLOAT_NOT_STRING", "BOOL_TYPE_INT_NOT_STRING",
                      "BOOL_TYPE_STRING_NOT_INT", "DOMAIN_INVALID_FOR_TYPE"},
    "new_feature": {"SCHEMA_NEW_COLUMN"},
    "shape": {"FEATURE_TYPE_HIGH_NUMBER_VALUES", "FEATURE_TYPE_LOW_NUMBER_VALUES", "FEATURE_TYPE_UNEXPECTED_REPEATED",
              "INVALID_FEATURE_SHAPE", "VALUE_NESTEDNESS_MISMATCH"},
}
_KIND_OF = {reason: kind for kind, reasons in _REASONS_BY_KIND.items() for reason in reasons}


def kind_of(reason: str) -> str:
    return _KIND_OF.get(reason, "other")


def _feature_name(info: anomalies_pb2.AnomalyInfo, key: str) -> str:
    return ".".join(info.path.step) or key


def _records_of(split: str, feature: str, info: anomalies_pb2.AnomalyInfo) -> list[Anomaly]:
    """One record per reason (an AnomalyInfo with MULTIPLE_REASONS lists each)."""
    severity = anomalies_pb2.AnomalyInfo.Severity.Name(info.severity)
    reasons = list(info.reason) or [anomalies_pb2.AnomalyInfo.Reason(
        type=_Type.UNKNOWN_TYPE, short_description=info.short_description, description=info.description)]
    return [Anomaly(split=split, feature=feature, kind=kind_of(_Type.Name(r.type)), reason=_Type.Name(r.type),
                    short_description=r.short_description, description=r.description.strip(), severity=severity)
            for r in reasons]


def anomaly_records(split: str, anomalies: anomalies_pb2.Anomalies) -> list[Anomaly]:
    """Every anomaly of one split, most important kind first, then by feature."""
    records: list[Anomaly] = []
    if anomalies.data_missing:  # TFDV's only signal for a split without examples
        records.append(Anomaly(split, DATASET, "empty_split", "NO_DATA_IN_SPAN", "No examples",
                               f"split {split!r} has no examples: every feature is missing", "ERROR"))
    for key, info in anomalies.anomaly_info.items():
        records.extend(_records_of(split, _feature_name(info, key), info))
    if anomalies.HasField("dataset_anomaly_info"):
        records.extend(_records_of(split, DATASET, anomalies.dataset_anomaly_info))
    return sorted(records, key=lambda a: (KINDS.index(a.kind), a.feature, a.reason))


def drift_measurements(split: str, anomalies: anomalies_pb2.Anomalies) -> list[DriftMeasurement]:
    """TFDV's distance from the baseline for every compared feature, above threshold or not."""
    measure = anomalies_pb2.DriftSkewInfo.Measurement.Type
    return sorted(
        (DriftMeasurement(split, ".".join(info.path.step), measure.Name(m.type), m.value, m.threshold)
         for info in anomalies.drift_skew_info for m in info.drift_measurements),
        key=lambda d: d.feature)
