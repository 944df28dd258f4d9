"""Cross-split leakage: the same file content in more than one split. Only 64-bit hashes travel.

>>> import numpy as np
>>> found = find_leaks([("train", 0, np.array([1, 2]), np.array([1, 2])), ("eval", 1, np.array([2]), np.array([7]))])
>>> found["count"], found["examples"][0]["occurrences"]
(1, [{'split': 'eval', 'index_id': 1, 'row': 7}, {'split': 'train', 'index_id': 0, 'row': 2}])
"""
from __future__ import annotations

from typing import Any, Iterable

import numpy as np

MAX_EXAMPLES = 5


def find_leaks(hashes: Iterable[tuple[str, int, np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """`hashes` holds (split, index id, content hashes, row of each); returns count and a few examples."""
    items = list(hashes)
    per_split: dict[str, list[np.ndarray]] = {}
    for split, _, digests, _ in items:
        per_split.setdefault(split, []).append(digests)
    uniques = [np.unique(np.concatenate(arrays)) for arrays in per_split.values() if arrays]
    if len(uniques) < 2:
        return {"count": 0, "examples": []}
    seen_in = np.concatenate(uniques)
    values, counts = np.unique(seen_in, return_counts=True)
    leaked = values[counts > 1]
    examples = []
    for digest in leaked[:MAX_EXAMPLES]:
        occurrences = []
        for split, index_id, digests, rows in items:
            for row in rows[digests == digest][:2]:
                occurrences.append({"split": split, "index_id": int(index_id), "row": int(row)})
        examples.append({"hash": f"{int(digest):016x}", "occurrences": sorted(occurrences, key=lambda o: (o["split"], o["row"]))})
    return {"count": int(leaked.size), "examples": examples}
