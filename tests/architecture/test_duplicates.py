"""A ratchet on repeated code: the pairs of files that share a run of six same-shape lines stay at most
`PINNED_PAIRS`.

The `duplicates` command of the developers' tool library finds such pairs, but it is not importable here
(nor installed where the suite runs), so this is a small, deterministic detector of the same idea:

- every .py file of `TREES`; blank lines, comments, lone punctuation and import lines are passed over;
- a line's shape is its tokens with every string `S`, number `N` and non-keyword name `I`;
- a window is `MIN_LINES` consecutive shaped lines with at least `MIN_TOKENS` tokens in all (thinner
  windows, such as runs of dataclass fields, are boilerplate); one that stands in more than
  `MOST_PLACES` places is too common to be a copy;
- two places with the same window make a pair of files (a file with itself when the places do not
  overlap). The count is of file pairs.

On 2026-11-26 it counted 24 pairs on main (the `duplicates` command: 13, with its own thresholds).
Removing a copy lowers the count: lower `PINNED_PAIRS` with it. A new pair fails the test, naming it;
fold the copy into one helper (`duplicates --change` shows what a change repeated).
"""
from __future__ import annotations

import itertools
import keyword
import re
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TREES = ("components", "pipelines", "tfx_adapter", "benchmarks", "testkit", "tests", "tests_tfx")
MIN_LINES, MIN_TOKENS, MOST_PLACES = 6, 50, 8
PINNED_PAIRS = 9
_TOKEN = re.compile(r"""(?P<string>[rbfuRBFU]{0,2}("[^"\\]*(?:\\.[^"\\]*)*"|'[^'\\]*(?:\\.[^'\\]*)*'))"""
                    r"|(?P<number>\b\d[\d_]*(\.\d+)?([eE][-+]?\d+)?\b)|(?P<name>[A-Za-z_]\w*)|(?P<other>\S)")
_PASSED_OVER = re.compile(r"^(#.*|[\[\](){}:,.]*|import\s.*|from\s+\S+\s+import\s.*)$")


def shape(line: str) -> tuple[str, ...]:
    """The line's tokens, strings, numbers and names made alike.

    >>> shape('total = rows["count"] + 1  # n')
    ('I', '=', 'I', '[', 'S', ']', '+', 'N', '#', 'I')
    >>> shape("for name in names:")
    ('for', 'I', 'in', 'I', ':')
    """
    tokens = []
    for match in _TOKEN.finditer(line):
        kind, text = match.lastgroup, match.group(0)
        if kind in ("string", "number"):
            tokens.append(kind[0].upper())
        elif kind == "name":
            tokens.append(text if keyword.iskeyword(text) else "I")
        else:
            tokens.append(text)
    return tuple(tokens)


def shaped_lines(text: str) -> list[tuple[str, ...]]:
    stripped = (line.strip() for line in text.splitlines())
    return [shape(line) for line in stripped if line and not _PASSED_OVER.match(line)]


def duplicate_pairs(texts: dict[str, str]) -> set[tuple[str, str]]:
    """The pairs of files (names of `texts`) that share a window of MIN_LINES same-shape lines."""
    places: dict[tuple, list[tuple[str, int]]] = defaultdict(list)
    for name, text in texts.items():
        lines = shaped_lines(text)
        for start in range(len(lines) - MIN_LINES + 1):
            window = tuple(lines[start:start + MIN_LINES])
            if sum(map(len, window)) >= MIN_TOKENS:
                places[window].append((name, start))
    pairs = set()
    for where in places.values():
        if 2 <= len(where) <= MOST_PLACES:
            for (a, i), (b, j) in itertools.combinations(where, 2):
                if a != b or abs(i - j) >= MIN_LINES:
                    pairs.add((min(a, b), max(a, b)))
    return pairs


def repository_texts() -> dict[str, str]:
    return {str(path.relative_to(REPO)): path.read_text(encoding="utf-8")
            for tree in TREES for path in sorted((REPO / tree).rglob("*.py"))}


def test_duplicate_pairs_stay_at_most_the_pinned_count() -> None:
    pairs = sorted(duplicate_pairs(repository_texts()))
    assert len(pairs) <= PINNED_PAIRS, "new repeated code:\n" + "\n".join(f"{a} ~ {b}" for a, b in pairs)


def test_a_planted_copy_is_a_pair() -> None:
    body = "".join(f"    total_{n} = compute(rows['count_{n}'], factor={n}) + offset(rows, 'x{n}')\n" for n in range(6))
    renamed = body.replace("total_", "sum_").replace("count_", "n_")  # the same shape under other names
    texts = {"a.py": f"def f(rows):\n{body}", "b.py": f"def g(rows):\n{renamed}", "c.py": "x = 1\n" * 8}
    assert duplicate_pairs(texts) == {("a.py", "b.py")}
