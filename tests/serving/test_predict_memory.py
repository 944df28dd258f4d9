"""Predict's model calls are sized in bytes: a worker cuts each batch into calls that fit --memory-mb.

The session's `mask_unet` (96 eval masks of 128 px, ~6 MB of U-Net activations an example): with
`--memory-mb 64`, batches of 64 become calls of ~10, and the masks written are the ones calls of 2
write; an explicit `--batch-size` over the budget fails the run in one line.
"""
from __future__ import annotations

import sys
from pathlib import Path

from helpers_processes import run_with_peak_rss
from shared_fixtures import MASK_EVAL

BUDGET_MB = 64


def _predict(mask_unet: tuple[Path, Path], out: Path, *options: str):
    examples, model = mask_unet
    return run_with_peak_rss([sys.executable, "-m", "shardflow", "predict", "--model", str(model), "--examples",
                              str(examples), "--split", "eval", "--output", str(out), "--memory-mb", str(BUDGET_MB),
                              "--direct_running_mode=in_memory", *options])


def _masks(out: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted((out / "masks").iterdir())}


def test_calls_fit_the_budget_and_write_the_masks_small_calls_write(mask_unet: tuple[Path, Path],
                                                                     tmp_path: Path) -> None:
    # Two runs each, their lower peak compared: what glibc's arenas keep varies from run to run and only
    # adds (measured over calls of 2: 60-92 MB above on one run, up to 170 MB before calls trimmed the heap)
    sized = [_predict(mask_unet, tmp_path / f"sized{run}") for run in range(2)]
    small = [_predict(mask_unet, tmp_path / f"small{run}", "--batch-size", "2") for run in range(2)]
    assert all(run.returncode == 0 for run in sized + small), [run.stderr[-2000:] for run in sized + small]
    masks = _masks(tmp_path / "sized0")
    assert len(masks) == MASK_EVAL and masks == _masks(tmp_path / "small0") == _masks(tmp_path / "sized1")
    # a batch of 64 masks in one call would hold ~4 budgets; the calls hold one
    sized_peak, small_peak = min(run.peak_rss for run in sized), min(run.peak_rss for run in small)
    assert sized_peak <= small_peak + (BUDGET_MB + 48) * (1 << 20), (sized_peak, small_peak)


def test_an_explicit_batch_over_the_budget_is_refused_in_one_line(mask_unet: tuple[Path, Path],
                                                                   tmp_path: Path) -> None:
    refused = _predict(mask_unet, tmp_path / "refused", "--batch-size", "64")
    assert refused.returncode == 2, refused.stderr[-3000:]
    lines = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--batch-size 64 needs about" in lines[0], lines
    assert not (tmp_path / "refused" / "predict.json").exists()
