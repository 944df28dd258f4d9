"""docs/benchmarks.md, generated from the suites' JSON results: no figure is copied by hand.

`make bench` runs `run_all --publish`: each suite's result goes to `benchmarks/results/<suite>.json`
and this page, and README.md's table between its markers, are written again from every result there. A suite never run with `--publish` shows
the command that would measure it.

    python -m benchmarks.docs_page            # rewrite docs/benchmarks.md from benchmarks/results/

>>> header({"command": "python -m benchmarks.run_all --only predict", "date": "2026-11-25", "seconds": 61.0,
...         "machine": {"cores": 2, "cpu": "AMD EPYC", "memory_gb": 23.5, "platform": "Linux x86_64"},
...         "load_before": 1.9, "load_after": 2.2, "quiet": False}).splitlines()[0]
'Measured 2026-11-25 with `python -m benchmarks.run_all --only predict` (61 s).'
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from .machine import QUIET_LOAD
from .suites import SUITES, load_suites

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
PAGE = ROOT / "docs" / "benchmarks.md"

INTRO = """# Benchmarks

What this page lets you do: see how fast shardflow is and how much memory it takes against the
hand-written code a user would otherwise write, on this project's 2-core machines, and re-measure
it. Every figure below is generated: `make bench` runs the suites (`benchmarks/run_all.py`), keeps
their JSON results in `benchmarks/results/`, and writes this page from them
(`benchmarks/docs_page.py`). Do not edit it by hand; a test compares it with the results.

```
make bench                                                    # every suite, default sizes
make bench BENCH_ARGS="--only predict --predict-rows 5k 50k"  # one suite, its own sizes
```

Each section says when and with which command it was measured, on what machine, and whether the
machine was quiet: processes outside the benchmark used under {quiet} cores on average while it ran
(sampled every 5 s; the load average, which counts the benchmark's own earlier work, is shown too;
a result recorded before that measure existed was called quiet by a load average under 0.5 at its start).
Ratios compare
contenders run one after the other in the same suite run, so they hold better than the absolute
rates on a busy machine. With `--repeats N` (`benchmarks/repeats.py`) a suite runs N rounds, the
contenders' order rotated each round; its tables show each contender's median run with every
round's total, and a time target is the median of the per-round ratios.
"""

# Suite → (title, what it compares): the section's anchor is the suite's name.
TITLES = {
    "example_gen": "ExampleGen: 28×28 PNGs to TFRecord shards, against hand-written writer loops",
    "transform": "Transform: tf.Transform materialization against a hand-written loop",
    "trainer": "Trainer input pipeline: shardflow's reader against plain tf.data readers, then LeNet",
    "evaluator": "Evaluator: `shardflow evaluate` against Keras `predict` on the same examples",
    "photos": "Photos: JPEG photographs to 224×224 RGB examples, against Pillow loops",
    "photos_e2e": "Photos end to end: `shardflow run` against a hand-written Keras script",
    "rerun_cache": "Reruns: what step caching saves on photos",
    "near_duplicates": "Near-duplicate images: hash recall, false pairs and search time",
    "predict": "Batch prediction: `shardflow predict` against hand-written SavedModel loops",
    "scoring_memory": "Scoring memory: `shardflow evaluate` and `predict` on masks, against the Trainer's peak",
    "gate": "The regression gate: false refusals and missed regressions of each rule, simulated",
    "detection": "Object detection: `shardflow run` on demo boxes, and boxes against labels alone",
    "detection_yolo": "Object detection against Ultralytics YOLOv8n: the same images and boxes, one COCO evaluator",
    "label_issues": "Label issues: the Evaluator's and find-label-issues' lists against cleanlab, on flipped photo labels",
    "box_label_issues": "Box label issues: find-label-issues on boxes against cleanlab's object_detection, on planted faults",
    "reader_s3": "The exact order from s3:// (moto on loopback) against a local disk",
}


def header(run: dict[str, Any]) -> str:
    machine = run["machine"]
    busy = "quiet" if run["quiet"] else "not quiet"
    if "other_cpu_mean" in run:
        how = (f"other processes used {run['other_cpu_mean']:.2f} cores on average, {run['other_cpu_max']:.2f} at most; "
               f"load average {run['load_before']:.2f} before, {run['load_after']:.2f} after")
    else:  # recorded before other processes' CPU was measured
        how = f"load average {run['load_before']:.2f} before, {run['load_after']:.2f} after"
    if "steal_fraction" in run:  # recorded since the machine's steal and the suite's CPU were measured
        how += (f"; steal {run['steal_fraction']:.1%} of CPU time ({run['steal_max']:.1%} at most); "
                f"the suite used {run['suite_cpu_seconds']:,.0f} CPU-seconds")
    return (f"Measured {run['date']} with `{run['command']}` ({run['seconds']:.0f} s).\n"
            f"Machine: {machine['cores']} cores ({machine['cpu']}), {machine['memory_gb']} GB, {machine['platform']}; "
            f"{busy} ({how}).")


def section(name: str, result: dict[str, Any] | None) -> str:
    lines = [f'<a id="{name}"></a>', f"## {TITLES.get(name, name)}", ""]
    if result is None:
        lines.append(f"Not measured yet: `make bench BENCH_ARGS=\"--only {name}\"`.")
        return "\n".join(lines)
    (suite,) = load_suites((name,))
    lines += [header(result["run"]), "", suite.markdown(result).strip()]
    return "\n".join(lines)


def render(results: Path = RESULTS) -> str:
    parts = [INTRO.format(quiet=QUIET_LOAD)]
    for name in SUITES:
        path = results / f"{name}.json"
        parts.append(section(name, json.loads(path.read_text()) if path.is_file() else None))
    return "\n\n".join(part.strip() for part in parts) + "\n"


def targets(result: Any) -> dict[str, bool]:
    """Every target a result records (`met` maps, `{"target", "met"}` rows), wherever the suite put it."""
    found: dict[str, bool] = {}
    if isinstance(result, dict):
        met = result.get("met")
        if isinstance(met, dict):
            found.update({k: bool(v) for k, v in met.items() if isinstance(v, bool)})
        elif isinstance(met, bool) and isinstance(result.get("target"), str):
            found[result["target"]] = met
        for key, value in result.items():
            if key != "met":
                found.update(targets(value))
    elif isinstance(result, list):
        for item in result:
            found.update(targets(item))
    return found


def summary(results: Path = RESULTS) -> str:
    """The README's table: one line a suite, linking to its section here."""
    lines = ["| suite | measured | machine | targets |", "|---|---|---|---|"]
    for name in SUITES:
        path = results / f"{name}.json"
        link = f"[{name}](docs/benchmarks.md#{name})"
        if not path.is_file():
            lines.append(f"| {link} | not yet | | |")
            continue
        result = json.loads(path.read_text())
        run, found = result["run"], targets(result)
        missed = sorted(k for k, v in found.items() if not v)
        verdict = (f"{len(found) - len(missed)} of {len(found)} met" + (f"; missed: {', '.join(missed)}" if missed else "")
                   if found else ("failed" if result.get("failed") else "none set"))
        lines.append(f"| {link} | {run['date']} | {'quiet' if run['quiet'] else 'not quiet'} | {verdict} |")
    return "\n".join(lines)


README = ROOT / "README.md"
START, END = "<!-- benchmarks: generated by benchmarks/docs_page.py -->", "<!-- end of benchmarks -->"


def readme_with_summary(text: str, results: Path = RESULTS) -> str:
    """README.md's text with the block between the markers replaced by `summary`."""
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{summary(results)}\n{END}{tail}"


def write(results: Path = RESULTS, page: Path = PAGE, readme: Path = README) -> Path:
    page.write_text(render(results))
    if START in readme.read_text():
        readme.write_text(readme_with_summary(readme.read_text(), results))
    return page


if __name__ == "__main__":
    print(write())
    sys.exit(0)
