"""The units of a box file, decided from evidence over the whole file, never from one value.

A layout that defines its units decides them (the Vertex AI / AutoML CSV and YOLO are normalised by definition;
COCO and Pascal VOC are in pixels), and so does `--box-units`. Otherwise ("auto", a CSV whose header names its
columns) the evidence is each box row's far corner, (x_max, y_max):

- in a normalised file it lies in [0, 1] on every row but a stray one;
- in a pixel file it lies in [0, 1] only for a box of at most one pixel, which is rejected anyway
  (`box_below_pixel`): a pixel file scores about 0, whatever its boxes touch (x_min = 0 is common in both).

The file is normalised when at least `NORMALIZED_SHARE` (98 %) of its box rows have their far corner in [0, 1],
in pixels when at most `PIXEL_SHARE` (2 %) do, and refused in one line in between (pass `--box-units`). The 2 %
tolerates one stray row in fifty; a file with more is either broken or ambiguous, and a guess would either turn
every box into a dot (read as pixels) or reject most rows (read as normalised). The out-of-range rows of a
normalised file are then rejects (`box_out_of_range`), each costing its own image.

Measured on `shardflow demo-data`'s boxes (5,166 box rows over 2,000 images, train and eval): all of them have
their far corner in [0, 1]; the same boxes in pixels of their 96-px images, none; with one planted 1.3 the share
is 99.98 %, with 20 planted strays 99.61 %: normalised, and each stray's image rejected.

>>> decide_units("auto", [(0.5, 0.9)] * 99 + [(1.3, 0.8)], "header").evidence["far_corner_in_unit_share"]
0.99
>>> decide_units("auto", [(0.5, 0.9)] * 99 + [(1.3, 0.8)], "header").units
'normalized'
>>> decide_units("auto", [(40.0, 0.0)] * 10, "header").units
'pixels'
>>> decide_units("auto", [(0.5, 0.9)] * 90 + [(120.0, 80.0)] * 10, "header")
Traceback (most recent call last):
shardflow.example_gen.box_units.UnitsUndecided: 90 of 100 box rows (90%) have their far corner (x_max, y_max) in [0, 1]: neither normalised (>= 98%) nor pixels (<= 2%); pass --box-units normalized or pixels
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

NORMALIZED_SHARE = 0.98
PIXEL_SHARE = 0.02
# The layouts whose units are fixed by their definition.
DEFINED_UNITS = {"automl": "normalized", "yolo": "normalized", "coco": "pixels", "voc": "pixels"}


class UnitsUndecided(ValueError):
    """The evidence of a file is neither normalised nor pixels: the run asks for `--box-units`."""


@dataclass(frozen=True)
class UnitsDecision:
    """A file's units and why: `decided_by` "flag", "layout" or "evidence"; `evidence` for the manifest."""

    units: str
    decided_by: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def as_json(self) -> dict[str, Any]:
        return {"units": self.units, "decided_by": self.decided_by, **self.evidence}


def decide_units(option: str, far_corners: Iterable[tuple[float, float]], layout: str) -> UnitsDecision:
    """The units of a file given `--box-units` (`option`), its box rows' (x_max, y_max) and its layout."""
    if option != "auto":
        return UnitsDecision(option, "flag")
    if layout in DEFINED_UNITS:
        return UnitsDecision(DEFINED_UNITS[layout], "layout", {"layout": layout})
    corners = list(far_corners)
    inside = sum(0.0 <= x <= 1.0 and 0.0 <= y <= 1.0 for x, y in corners)
    share = inside / len(corners) if corners else 1.0
    evidence = {"rule": f"normalized when >= {NORMALIZED_SHARE:.0%} of box rows have x_max, y_max in [0, 1], "
                        f"pixels when <= {PIXEL_SHARE:.0%}", "box_rows": len(corners),
                "far_corner_in_unit": inside, "far_corner_in_unit_share": round(share, 4)}
    if share >= NORMALIZED_SHARE:
        return UnitsDecision("normalized", "evidence", evidence)
    if share <= PIXEL_SHARE:
        return UnitsDecision("pixels", "evidence", evidence)
    raise UnitsUndecided(f"{inside} of {len(corners)} box rows ({share:.0%}) have their far corner (x_max, y_max) "
                         f"in [0, 1]: neither normalised (>= {NORMALIZED_SHARE:.0%}) nor pixels "
                         f"(<= {PIXEL_SHARE:.0%}); pass --box-units normalized or pixels")
