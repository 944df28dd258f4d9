"""Unit tests of ExampleGen's pure pieces (no Beam): CSV chunks, splitting, columns, images, config, CLI."""
from __future__ import annotations

import io
import os
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from helpers_images import write_palette_mask, write_png
from shardflow.cli import build_parser
from shardflow.cli import main as shardflow_main
from shardflow.example_gen.cli import config_from_args
from shardflow.example_gen.columns import detect_columns, guess_value_dtype
from shardflow.example_gen.config import ConfigError, ExampleGenConfig, IndexSpec
from shardflow.example_gen.csv_index import IndexFileError, count_rows, plan_chunks, read_chunk, read_header
from shardflow.example_gen.images import BadCell, DataRoot, ImageRules, decode, encode
from shardflow.example_gen.splitting import SplitAssigner

# ---------------------------------------------------------------- csv_index

CSV_TEXT = (
    'x,y,note\n'
    'a.png,1,plain\n'
    '\n'                                   # blank lines are not rows
    '"b,c.png",2,"two\nlines"\n'           # quoted comma and quoted newline: one record
    'd.png,3\n'                            # too few fields
    '\r\n'
    '"e.png,4,stray quote\n'               # unbalanced quote: must not swallow the rows after it
    'f.png,5,"say ""hi"""\n'               # escaped quotes keep the parity
    'g.png,6,last'                         # no final newline
)
EXPECTED = [(1, ["a.png", "1", "plain"]), (2, ["b,c.png", "2", "two\nlines"]), (3, None), (4, None),
            (5, ["f.png", "5", 'say "hi"']), (6, ["g.png", "6", "last"])]


def _all_records(path: Path, rows_per_chunk: int) -> list:
    header, chunks = plan_chunks(str(path), index_id=0, rows_per_chunk=rows_per_chunk)
    assert header == ["x", "y", "note"]
    assert [c.chunk_no for c in chunks] == list(range(len(chunks)))
    assert all(c.num_rows <= rows_per_chunk for c in chunks)
    records = [r for chunk in chunks for r in read_chunk(chunk)]
    assert [r.row for r in records] == [c.first_row + i for c in chunks for i in range(c.num_rows)]
    return records


@pytest.mark.parametrize("rows_per_chunk", [1, 2, 3, 4, 5, 6, 100])
def test_csv_chunks_give_the_same_records_at_every_chunk_size(tmp_path: Path, rows_per_chunk: int) -> None:
    path = tmp_path / "i.csv"
    path.write_bytes(CSV_TEXT.encode())
    records = _all_records(path, rows_per_chunk)
    assert [(r.row, r.cells) for r in records] == EXPECTED
    assert count_rows(str(path)) == len(EXPECTED)
    errors = {r.row: r.error for r in records if r.cells is None}
    assert "2 fields, the header has 3" in errors[3]
    assert errors[4].startswith("malformed CSV record")


def test_stray_quote_on_the_last_row_and_non_utf8_row(tmp_path: Path) -> None:
    path = tmp_path / "i.csv"
    path.write_bytes(b'x,y\na.png,1\nb\xff.png,2\nc.png,3\n"d.png,4\n')
    _, chunks = plan_chunks(str(path), index_id=0, rows_per_chunk=1)
    records = [r for chunk in chunks for r in read_chunk(chunk)]
    assert [(r.row, r.cells) for r in records] == [(1, ["a.png", "1"]), (2, None), (3, ["c.png", "3"]), (4, None)]


@pytest.mark.parametrize("text, message", [(b"", "empty index file"), (b"x,x\n", "duplicate"),
                                           (b"x,,y\n", "empty or duplicate"), (b'"x,y\n', "header does not parse")])
def test_unusable_headers(tmp_path: Path, text: bytes, message: str) -> None:
    path = tmp_path / "i.csv"
    path.write_bytes(text)
    with pytest.raises(IndexFileError, match=message):
        read_header(str(path))


# ---------------------------------------------------------------- splitting

NINE_ONE = (("train", 9), ("eval", 1))


def test_split_is_deterministic_and_pinned() -> None:
    keys = [[f"image/{i}.png"] for i in range(200)]
    first = [SplitAssigner(NINE_ONE, (0,)).assign(k) for k in keys]
    assert first == [SplitAssigner(NINE_ONE, (0,)).assign(k) for k in keys]
    # Pinned values: a different hash (e.g. Python's salted hash()) would move rows between runs.
    assert [SplitAssigner(NINE_ONE, (0,)).bucket(f"image/{i}.png") for i in range(8)] == [9, 5, 2, 2, 0, 4, 2, 5]


def test_split_ratio_is_close_to_the_weights() -> None:
    assigner = SplitAssigner(NINE_ONE, (0,))
    counts = Counter(assigner.assign([f"img/{i:05d}.png"]) for i in range(5000))
    assert abs(counts["eval"] - 500) < 85, counts  # 4 binomial standard deviations
    three = SplitAssigner((("a", 1), ("b", 1), ("c", 2)), (0,))
    counts3 = Counter(three.assign([f"img/{i:05d}.png"]) for i in range(5000))
    assert all(abs(counts3[n] - e) < 130 for n, e in (("a", 1250), ("b", 1250), ("c", 2500))), counts3


def test_adding_rows_never_moves_existing_rows() -> None:
    rows = [[f"img/{i}.png", str(i % 10)] for i in range(3000)]
    before = [SplitAssigner(NINE_ONE, (0,)).assign(r) for r in rows[:1000]]
    assigner = SplitAssigner(NINE_ONE, (0,))
    after = [assigner.assign(r) for r in rows[1000:] + rows[:1000]]  # more rows, other order
    assert after[2000:] == before
    relabelled = [assigner.assign([r[0], "7"]) for r in rows[:1000]]  # only the key columns count
    assert relabelled == before


def test_split_key_keeps_groups_together() -> None:
    assigner = SplitAssigner(NINE_ONE, (2,))
    by_patient: dict[str, set[str]] = {}
    for i in range(2000):
        patient = f"p{i % 150}"
        by_patient.setdefault(patient, set()).add(assigner.assign([f"img/{i}.png", str(i % 3), patient]))
    assert all(len(splits) == 1 for splits in by_patient.values())
    assert Counter(next(iter(s)) for s in by_patient.values()).keys() == {"train", "eval"}


# ---------------------------------------------------------------- columns

def _config(tmp_path: Path, **options: object) -> ExampleGenConfig:
    index = tmp_path / "i.csv"
    if not index.exists():
        index.write_text("x\n")
    (tmp_path / "root").mkdir(exist_ok=True)
    return ExampleGenConfig(indexes=(IndexSpec(str(index)),), data_root=str(tmp_path / "root"),
                            output=str(tmp_path / "out"), **options)  # type: ignore[arg-type]


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
    specs = detect_columns(header, samples, _config(tmp_path))
    assert _summary(specs) == {  # img/0.png is RGB: the column follows the gray majority
        "img": ("image", "uint8", (8, 8, 1)), "seg": ("mask", "uint8", (8, 8, 1)),
        "y": ("label", "int64", ()), "site": ("metadata", "string", ()), "age": ("metadata", "float32", ())}
    assert [s.position for s in specs] == [0, 1, 2, 3, 4]
    assert specs[0].storage == "raw" and specs[1].rules.nearest and not specs[0].rules.nearest


def test_label_rules_without_a_label_name(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    config = _config(tmp_path)
    only = detect_columns(["img", "grade"], [[r[0], r[2]] for r in samples], config)
    assert _summary(only)["grade"][0] == "label"  # the only non-file column
    two = detect_columns(["img", "site", "grade"], [[r[0], r[3], r[2]] for r in samples], config)
    assert [s.role for s in two] == ["image", "metadata", "metadata"]


def test_role_overrides(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    site_label = detect_columns(header, samples, _config(tmp_path, roles=(("site", "label"),)))
    assert [s.role for s in site_label] == ["image", "mask", "metadata", "label", "metadata"]
    no_label = detect_columns(["img", "y", "site"], [[r[0], r[2], r[3]] for r in samples],
                              _config(tmp_path, roles=(("y", "metadata"),)))
    assert [s.role for s in no_label] == ["image", "metadata", "metadata"], "site must not become the label"
    os.rename(tmp_path / "root/seg", tmp_path / "root/files")  # extensionless names: not detected ...
    for i in range(len(samples)):
        os.rename(tmp_path / f"root/files/{i}.png", tmp_path / f"root/files/{i}")
    plain = [[f"files/{i}", r[2]] for i, r in enumerate(samples)]
    assert detect_columns(["m", "y"], plain, _config(tmp_path))[0].role == "metadata"
    forced = detect_columns(["m", "y"], plain, _config(tmp_path, roles=(("m", "mask"),)))  # ... unless forced
    assert _summary(forced)["m"] == ("mask", "uint8", (8, 8, 1))


def test_column_errors_name_the_column(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    with pytest.raises(ConfigError, match="'nope'"):
        detect_columns(header, samples, _config(tmp_path, roles=(("nope", "label"),)))
    with pytest.raises(ConfigError, match="'seg' is a mask: jpeg"):
        detect_columns(header, samples, _config(tmp_path, storage=(("*", "jpeg"),)))
    missing = [[f"img/missing{i}.png", "1"] for i in range(3)]
    with pytest.raises(ConfigError, match="column 'img': none of the 3 sampled files"):
        detect_columns(["img", "y"], missing, _config(tmp_path))


def test_resize_and_channels_apply_per_column(tmp_path: Path) -> None:
    header, samples = _dataset(tmp_path)
    config = _config(tmp_path, resize=(("*", (4, 6)),), channels=(("*", "rgb"),), storage=(("img", "png"),))
    specs = _summary(detect_columns(header, samples, config))
    assert specs["img"] == ("image", "uint8", (4, 6, 3))
    assert specs["seg"] == ("mask", "uint8", (4, 6, 1)), "masks keep their class ids: no channel conversion"


# ---------------------------------------------------------------- images

@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    """root/ with a.png, sub/b.png, in-root and out-of-root symlinks; root2/ and outside/ beside it."""
    for folder in ("root/sub", "root2", "outside"):
        (tmp_path / folder).mkdir(parents=True)
    for path in ("root/a.png", "root/sub/b.png", "root2/c.png", "outside/d.png"):
        write_png(tmp_path / path, np.zeros((2, 2), np.uint8))
    os.symlink(tmp_path / "root/a.png", tmp_path / "root/inside_link.png")
    os.symlink(tmp_path / "outside/d.png", tmp_path / "root/outside_link.png")
    os.symlink(tmp_path / "outside", tmp_path / "root/outside_dir")
    return tmp_path


@pytest.mark.parametrize("cell, inside", [
    ("a.png", True), ("sub/b.png", True), ("sub/../a.png", True), ("inside_link.png", True),
    ("../outside/d.png", False), ("../root2/c.png", False), ("sub/../../outside/d.png", False),
    ("outside_link.png", False), ("outside_dir/d.png", False), ("/etc/passwd", False)])
def test_data_root_containment(tree: Path, cell: str, inside: bool) -> None:
    root = DataRoot(str(tree / "root"))
    if inside:
        assert root.read(cell) == (tree / "root" / cell).read_bytes()
    else:
        with pytest.raises(BadCell) as err:
            root.read(cell)
        assert (err.value.code, err.value.reason) == ("path_escapes_root", f"path escapes the data root: {cell}")


def test_absolute_path_inside_the_root_is_fine(tree: Path) -> None:
    assert DataRoot(str(tree / "root")).read(str(tree / "root/sub/b.png")) == (tree / "root/sub/b.png").read_bytes()


def test_read_rejects_what_is_not_a_readable_regular_file(tree: Path) -> None:
    root_dir = tree / "root"
    (root_dir / "empty.png").write_bytes(b"")
    os.symlink(root_dir / "gone.png", root_dir / "dangling.png")
    os.symlink("loop2", root_dir / "loop1")
    os.symlink("loop1", root_dir / "loop2")
    os.mkfifo(root_dir / "pipe.png")
    cases = {"nope.png": "missing_file", "dangling.png": "missing_file", "sub": "is_directory",
             "empty.png": "empty_file", "loop1": "unreadable_file", "pipe.png": "unreadable_file"}
    if os.geteuid() != 0:  # root reads chmod 000 files anyway
        (root_dir / "locked.png").write_bytes(b"x")
        (root_dir / "locked.png").chmod(0)
        cases["locked.png"] = "unreadable_file"
    root = DataRoot(str(root_dir))
    got: dict[str, str] = {}

    def read_all() -> None:
        for cell in cases:
            try:
                root.read(cell)
            except BadCell as err:
                got[cell] = err.code

    reader = threading.Thread(target=read_all, daemon=True)  # a FIFO read could block forever
    reader.start()
    reader.join(timeout=20)
    assert not reader.is_alive(), "reading a named pipe blocked"
    assert got == cases


def _png_bytes(pixels: np.ndarray, mode: str | None = None) -> bytes:
    out = io.BytesIO()
    image = Image.fromarray(pixels)
    (image.convert(mode) if mode else image).save(out, format="PNG")
    return out.getvalue()


def test_decode_conversions() -> None:
    rng = np.random.default_rng(0)
    rgb = rng.integers(0, 256, (5, 7, 3), dtype=np.uint8)
    gray = rng.integers(0, 256, (5, 7), dtype=np.uint8)
    wide = rng.integers(0, 65536, (5, 7), dtype=np.uint16)
    keep = ImageRules(max_pixels=1000)
    assert np.array_equal(decode(_png_bytes(rgb), keep), rgb)
    assert np.array_equal(decode(_png_bytes(gray), keep), gray[:, :, None])
    as_gray = decode(_png_bytes(rgb), ImageRules(1000, channels="gray"))
    assert as_gray.shape == (5, 7, 1) and np.array_equal(as_gray[:, :, 0], np.asarray(Image.fromarray(rgb).convert("L")))
    as_rgb = decode(_png_bytes(gray), ImageRules(1000, channels="rgb"))
    assert as_rgb.shape == (5, 7, 3) and all(np.array_equal(as_rgb[:, :, c], gray) for c in range(3))
    sixteen = decode(_png_bytes(wide), keep)
    assert sixteen.dtype == np.uint16 and np.array_equal(sixteen[:, :, 0], wide)
    assert encode(sixteen, "raw") == wide.astype("<u2").tobytes()
    assert decode(_png_bytes(rgb, "RGBA"), keep).shape == (5, 7, 4)
    assert decode(_png_bytes(gray, "LA"), keep).shape == (5, 7, 1)
    palette = _png_bytes(rgb, "P")
    assert decode(palette, keep).shape == (5, 7, 3), "a palette image becomes RGB"
    jpeg = io.BytesIO()
    Image.fromarray(gray).save(jpeg, format="JPEG")
    assert decode(jpeg.getvalue(), keep).shape == (5, 7, 1)
    for storage in ("raw", "png"):
        for pixels in (rgb, gray[:, :, None], sixteen):
            payload = encode(pixels, storage)
            back = np.frombuffer(payload, pixels.dtype).reshape(pixels.shape) if storage == "raw" else decode(payload, keep)
            assert np.array_equal(back, pixels)


def test_nearest_resize_keeps_mask_ids() -> None:
    ids = (np.indices((8, 8)).sum(axis=0) % 2 * 5).astype(np.uint8)  # checkerboard of ids 0 and 5
    data = _png_bytes(ids)
    for size in ((16, 16), (5, 3), (8, 12)):
        mask = decode(data, ImageRules(1000, resize=size, nearest=True))
        assert mask.shape == (*size, 1) and set(np.unique(mask)) <= {0, 5}
    doubled = decode(data, ImageRules(1000, resize=(16, 16), nearest=True))[:, :, 0]
    assert np.array_equal(doubled, ids.repeat(2, axis=0).repeat(2, axis=1))
    smooth = decode(data, ImageRules(1000, resize=(5, 3)))  # an image resize blends: not for masks
    assert set(np.unique(smooth)) - {0, 5}


def test_decode_rejects_bad_bytes_and_bombs() -> None:
    good = _png_bytes(np.zeros((16, 16), np.uint8))
    cases = [(b"GIF89a....", "not_an_image"), (b"hello", "not_an_image"), (good[:40], "corrupt_image"),
             (good, "too_many_pixels")]
    for data, code in cases:
        with pytest.raises(BadCell) as err:
            decode(data, ImageRules(max_pixels=255))
        assert err.value.code == code
    assert decode(good, ImageRules(max_pixels=256)).shape == (16, 16, 1)


# ---------------------------------------------------------------- config and CLI

@pytest.mark.parametrize("options, message", [
    ({"compression": "ZIP"}, "compression must be one of .* got 'ZIP'"),
    ({"shard_size_mb": 0.0}, "shard_size_mb must be > 0, got 0.0"),
    ({"num_shards": 0}, "num_shards must be >= 1, got 0"),
    ({"min_shards": 0}, "min_shards must be >= 1, got 0"),
    ({"max_reject_fraction": 1.5}, r"max_reject_fraction must be within \[0, 1\], got 1.5"),
    ({"max_pixels": 0}, "max_pixels must be >= 1, got 0"),
    ({"rows_per_chunk": 0}, "rows_per_chunk must be >= 1, got 0"),
    ({"split_weights": (("train", 9), ("train", 1))}, "unique .* \\['train', 'train'\\]"),
    ({"split_weights": (("tr ain", 9),)}, "split name 'tr ain'"),
    ({"split_weights": (("train", 0),)}, "split weight of 'train' must be >= 1, got 0"),
    ({"roles": (("y", "target"),)}, "role of column 'y' .* got 'target'"),
    ({"resize": (("img", (0, 28)),)}, "resize of 'img' must be positive HxW, got 0x28"),
    ({"channels": (("*", "cmyk"),)}, "channels of '\\*' .* got 'cmyk'"),
    ({"storage": (("img", "webp"),)}, "storage of 'img' .* got 'webp'"),
])
def test_config_errors_name_the_bad_value(tmp_path: Path, options: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _config(tmp_path, **options)


def test_config_errors_about_paths_and_indexes(tmp_path: Path) -> None:
    base = _config(tmp_path)
    index, root = base.indexes[0].path, base.data_root
    cases = [
        (dict(indexes=(IndexSpec(str(tmp_path / "nope.csv")),)), "index file '.*nope.csv' does not exist"),
        (dict(data_root=str(tmp_path / "i.csv")), "data_root '.*i.csv' is not a directory"),
        (dict(output=root), "would contain or replace data_root"),
        (dict(output=str(tmp_path)), "would contain or replace data_root"),
        (dict(indexes=(IndexSpec(index, "train"), IndexSpec(index))), "all name a split"),
        (dict(indexes=(IndexSpec(index), IndexSpec(index))), "name their splits"),
        (dict(indexes=()), "at least one --index"),
        (dict(indexes=(IndexSpec(index, "train"),), split_key="patient"), "--split-key applies only"),
    ]
    for change, message in cases:
        fields = {"indexes": base.indexes, "data_root": root, "output": base.output, **change}
        with pytest.raises(ConfigError, match=message):
            ExampleGenConfig(**fields)  # type: ignore[arg-type]


def test_index_spec_and_per_column_values() -> None:
    assert IndexSpec.parse("train=d/train.csv") == IndexSpec("d/train.csv", "train")
    assert IndexSpec.parse("d/all.csv") == IndexSpec("d/all.csv", None)
    assert IndexSpec.parse("d/a=b.csv") == IndexSpec("d/a=b.csv", None)  # "d/a" is not a split name
    table = (("*", "png"), ("seg", "raw"))
    assert ExampleGenConfig.per_column(None, table, "seg", "x") == "raw"  # type: ignore[arg-type]
    assert ExampleGenConfig.per_column(None, table, "img", "x") == "png"  # type: ignore[arg-type]
    assert ExampleGenConfig.per_column(None, (), "img", "x") == "x"  # type: ignore[arg-type]


def _from_cli(tmp_path: Path, *flags: str):
    base = _config(tmp_path)
    argv = ["example-gen", "--index", base.indexes[0].path, "--data-root", base.data_root, "--output", base.output, *flags]
    args, extra = build_parser().parse_known_args(argv)
    return config_from_args(args, extra)


def test_cli_flags_translate_into_the_config(tmp_path: Path) -> None:
    defaults = _from_cli(tmp_path)
    assert defaults == _config(tmp_path)  # the CLI defaults are the config defaults
    config = _from_cli(
        tmp_path, "--split", "train=8", "--split", "eval=1", "--split", "test=1", "--split-key", "patient",
        "--role", "site=metadata", "--resize", "28x28", "--resize", "seg=14x7", "--channels", "gray",
        "--storage", "img=png", "--gzip", "--num-shards", "4", "--min-shards", "2", "--shard-size-mb", "64",
        "--max-reject-fraction", "0.2", "--max-pixels", "1000", "--rows-per-chunk", "50",
        "--runner=DirectRunner", "--direct_num_workers", "2")
    assert config.split_weights == (("train", 8), ("eval", 1), ("test", 1))
    assert config.split_key == "patient" and config.roles == (("site", "metadata"),)
    assert config.resize == (("*", (28, 28)), ("seg", (14, 7)))
    assert config.channels == (("*", "gray"),) and config.storage == (("img", "png"),)
    assert (config.compression, config.num_shards, config.min_shards, config.shard_size_mb) == ("GZIP", 4, 2, 64.0)
    assert (config.max_reject_fraction, config.max_pixels, config.rows_per_chunk) == (0.2, 1000, 50)
    assert config.beam_args == ("--runner=DirectRunner", "--direct_num_workers", "2")
    assert config.split_names == ("train", "eval", "test") and config.hash_split


def test_cli_rejects_bad_flag_values(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(ConfigError, match="--resize expects HxW such as 28x28, got '28'"):
        _from_cli(tmp_path, "--resize", "28")
    with pytest.raises(ConfigError, match="--split expects NAME=WEIGHT such as train=9, got 'train'"):
        _from_cli(tmp_path, "--split", "train")
    base = _config(tmp_path)
    code = shardflow_main(["example-gen", "--index", base.indexes[0].path, "--data-root", base.data_root,
                           "--output", base.output, "--storage", "webp"])
    assert code == 2
    assert "shardflow example-gen: error: storage of '*' must be one of" in capsys.readouterr().err
