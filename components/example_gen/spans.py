"""Data spans: index paths with `{SPAN}` or `{YYYY}{MM}{DD}` resolved to the latest span(s) on disk.

Users drop new data into numbered or dated folders; a pattern names them all and the newest
`count` spans present for *every* index pattern form the window (oldest first):

    >>> SPAN_PATTERN.search("data/span-{SPAN}/train.csv") is not None
    True

    spans = resolve_spans((IndexSpec("data/span-{SPAN}/train.csv", "train"),), "data/span-{SPAN}", 2)
    [s.key for s in spans]          # ['2', '3'] when span-1 … span-3 exist
    spans[-1].indexes[0].path       # 'data/span-3/train.csv'
"""
from __future__ import annotations

import fnmatch
import glob
import re
from dataclasses import dataclass

from ..core import storage, uri
from ..core.errors import ConfigError

SPAN_PATTERN = re.compile(r"\{(SPAN|YYYY|MM|DD)\}")
_TOKEN_REGEX = {"SPAN": r"(?P<SPAN>\d+)", "YYYY": r"(?P<YYYY>\d{4})", "MM": r"(?P<MM>\d{2})", "DD": r"(?P<DD>\d{2})"}


@dataclass(frozen=True)
class Span:
    """One span: its key (the SPAN number, or YYYYMMDD), its concrete index files and data root."""

    key: str
    indexes: tuple  # tuple[IndexSpec, ...] with the tokens substituted
    data_root: str

    @property
    def order(self) -> tuple[int, str]:
        return (int(self.key), self.key) if self.key.isdigit() else (0, self.key)


def has_span_pattern(text: str) -> bool:
    return SPAN_PATTERN.search(text) is not None


def pattern_matches(pattern: str) -> list[str]:
    """Every existing path or object the pattern may name (its tokens as wildcards), sorted.

    Local patterns glob; s3:// and gs:// patterns walk the prefix one level at a time with
    `storage.list_names`, matching each wildcard segment (a wildcard never spans a "/").
    """
    wildcard = SPAN_PATTERN.sub("*", pattern)
    if not uri.is_remote(wildcard):
        return sorted(glob.glob(wildcard))
    bucket, key = uri.split_bucket(wildcard)
    found = [f"{uri.scheme(wildcard)}://{bucket}"]
    segments = key.split("/")
    for depth, segment in enumerate(segments):
        last = depth == len(segments) - 1
        if not glob.has_magic(segment):
            found = [uri.join(p, segment) for p in found]
            found = [p for p in found if storage.is_file(p)] if last else found
            continue
        found = [uri.join(p, name) for p in found for name in storage.list_names(p)
                 if fnmatch.fnmatchcase(name, segment)]
        if last:
            found = [p for p in found if storage.is_file(p)]
    return sorted(found)


def _check_tokens(pattern: str) -> None:
    tokens = set(SPAN_PATTERN.findall(pattern))
    if tokens and tokens != {"SPAN"} and tokens != {"YYYY", "MM", "DD"}:
        raise ConfigError(f"index pattern {pattern!r}: use {{SPAN}} or all of {{YYYY}}{{MM}}{{DD}}, not {sorted(tokens)}")


def _keys_on_disk(pattern: str) -> dict[str, str]:
    """span key → concrete path, for every existing file matching `pattern`."""
    _check_tokens(pattern)
    regex = re.compile("^" + "".join(_TOKEN_REGEX[part] if i % 2 else re.escape(part)
                                     for i, part in enumerate(SPAN_PATTERN.split(pattern))) + "$")
    found = {}
    for path in pattern_matches(pattern):
        match = regex.match(path)
        if match:
            groups = match.groupdict()
            key = str(int(groups["SPAN"])) if "SPAN" in groups else groups["YYYY"] + groups["MM"] + groups["DD"]
            found[key] = path
    return found


def substitute(pattern: str, key: str) -> str:
    """The pattern with one span's key filled in (used for the data root)."""
    if "{SPAN}" in pattern:
        return pattern.replace("{SPAN}", key)
    return pattern.replace("{YYYY}", key[:4]).replace("{MM}", key[4:6]).replace("{DD}", key[6:8])


def resolve_spans(indexes: tuple, data_root: str, count: int) -> list[Span]:
    """The newest `count` spans that have every index file (fewer if fewer exist), oldest first."""
    if count < 1:
        raise ConfigError(f"spans must be >= 1, got {count!r}")
    per_index = [_keys_on_disk(index.path) for index in indexes]
    common = set(per_index[0]).intersection(*per_index[1:])
    if not common:
        patterns = ", ".join(index.path for index in indexes)
        raise ConfigError(f"no span has all of its index files: {patterns} (found {[sorted(k) for k in per_index]})")
    spans = []
    for key in common:
        concrete = tuple(type(index)(found[key], index.split) for index, found in zip(indexes, per_index))
        spans.append(Span(key, concrete, substitute(data_root, key)))
    return sorted(spans, key=lambda s: s.order)[-count:]
