"""Unit tests of column role and type detection, and per-column options."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from helpers_config import minimal_config
from helpers_images import write_palette_mask, write_png
from shardflow.example_gen.columns import detect_columns, guess_value_dtype
from shardflow.example_gen.config import ConfigError

pytestmark = pytest.mark.unit  # in process, small generated data, no server: make test-fast runs it

# ---------------------------------------------------------------- columns

def _dataset(tmp_path: Path, rows: int = 6) -> tuple[list[str], list[list[str]]]:
    """img (gray 8x8, the first one RGB), seg (palette masks), y int, site string, age float."""
    root = tmp_path / "root"
    samples = []
    for i in range(rows):
        shape = (8, 8, 3) if i == 0 else (8, 8)
        write_png(root / f"img/{i}.png", np.full(shape, i * 10, np.uint8))
        write_palette_mask(root / f"seg/{i}.png", (np.arange(64).reshape(8, 8) + i) % 4)
        samples.append([f"img/{i}.png", f"seg/{i}.png", str(i % 3), f"site{i % 2}", f"{i}.5"])
    return ["img", "seg", "y", "site", "age"], samples


def _summary(specs: list) -> dict[str, tuple]:
    return {s.name: (s.role, s.dtype, s.shape) for s in specs}


def test_value_dtypes() -> None:
    assert guess_value_dtype(["1", "-2", ""]) == "int64"
    assert guess_value_dtype(["1", "2.5", "1e3"]) == "float32"
    assert guess_value_dtype(["1", "two"]) == "string"
    assert guess_value_dtype(["", ""]) == "string"


def test_detects_roles_types_and_the_majority_shape(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    specs = detect_columns(header, samples, minimal_config(tmp_path))
    assert _summary(specs) == {  # img/0.png is RGB: the column follows the gray majority
        "img": ("image", "uint8", (8, 8, 1)), "seg": ("mask", "uint8", (8, 8, 1)),
        "y": ("label", "int64", ()), "site": ("metadata", "string", ()), "age": ("metadata", "float32", ())}
    assert [s.position for s in specs] == [0, 1, 2, 3, 4]
    assert specs[0].storage == "raw" and specs[1].rules.nearest and not specs[0].rules.nearest


def test_label_rules_without_a_label_name(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    config = minimal_config(tmp_path)
    only = detect_columns(["img", "grade"], [[r[0], r[2]] for r in samples], config)
    assert _summary(only)["grade"][0] == "label"  # the only non-file column
    two = detect_columns(["img", "site", "grade"], [[r[0], r[3], r[2]] for r in samples], config)
    assert [s.role for s in two] == ["image", "metadata", "metadata"]


def test_role_overrides(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    site_label = detect_columns(header, samples, minimal_config(tmp_path, roles=(("site", "label"),)))
    assert [s.role for s in site_label] == ["image", "mask", "metadata", "label", "metadata"]
    no_label = detect_columns(["img", "y", "site"], [[r[0], r[2], r[3]] for r in samples],
                              minimal_config(tmp_path, roles=(("y", "metadata"),)))
    assert [s.role for s in no_label] == ["image", "metadata", "metadata"], "site must not become the label"
    os.rename(tmp_path / "root/seg", tmp_path / "root/files")  # extensionless names: sniffed as PNG ...
    for i in range(len(samples)):
        os.rename(tmp_path / f"root/files/{i}.png", tmp_path / f"root/files/{i}")
    plain = [[f"files/{i}", r[2]] for i, r in enumerate(samples)]
    assert detect_columns(["m", "y"], plain, minimal_config(tmp_path))[0].role == "image"  # ... so an image column
    kept = detect_columns(["m", "y"], plain, minimal_config(tmp_path, roles=(("m", "metadata"),)))
    assert kept[0].role == "metadata"  # --role overrides the sniffing
    forced = detect_columns(["m", "y"], plain, minimal_config(tmp_path, roles=(("m", "mask"),)))
    assert _summary(forced)["m"] == ("mask", "uint8", (8, 8, 1))


def test_column_errors_name_the_column(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    with pytest.raises(ConfigError, match="'nope'"):
        detect_columns(header, samples, minimal_config(tmp_path, roles=(("nope", "label"),)))
    with pytest.raises(ConfigError, match="'seg' is a mask: jpeg"):
        detect_columns(header, samples, minimal_config(tmp_path, storage=(("*", "jpeg"),)))
    missing = [[f"img/missing{i}.png", "1"] for i in range(3)]
    with pytest.raises(ConfigError, match="column 'img': none of the 3 sampled files"):
        detect_columns(["img", "y"], missing, minimal_config(tmp_path))


def test_resize_and_channels_apply_per_column(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    config = minimal_config(tmp_path, resize=(("*", (4, 6)),), channels=(("*", "rgb"),), storage=(("img", "png"),))
    specs = _summary(detect_columns(header, samples, config))
    assert specs["img"] == ("image", "uint8", (4, 6, 3))
    assert specs["seg"] == ("mask", "uint8", (4, 6, 1)), "masks keep their class ids: no channel conversion"
