"""A detector's label map as the TF Object Detection API keeps it: `label_map.pbtxt` beside the model.

The file is a `StringIntLabelMap` in protobuf text format (the OD API's protos/string_int_label_map.proto, read
by its utils/label_map_util.py through `text_format.Merge`): one `item { id: 3 name: 'disc' }` per class. The
Trainer's export writes it into the model directory, so Push copies it into every served version; predict and
the Evaluator read the model's label map from it (`model_label_map`).

`parse_label_map` is the one reader: `#` comments, `display_name` (and the proto's other fields, even nested
ones) skipped, items in any order, single- or double-quoted names with C escapes, `:` before `{` optional and
`,`/`;` separators, as text_format takes them. The OD API's own checks are kept: ids >= 0, id 0 only for
'background' (which is no class of shardflow's and is left out), and names and ids unique.

>>> text = format_label_map(LabelMap({"disc": 3, "it's": 7}))
>>> print(text, end="")
item {
  id: 3
  name: 'disc'
}
item {
  id: 7
  name: 'it\\'s'
}
>>> parse_label_map(text) == LabelMap({"disc": 3, "it's": 7})
True
"""
from __future__ import annotations

import os
import re

from . import storage
from .box_schema import LabelMap
from .model_info import ModelInfo

LABEL_MAP_NAME = "label_map.pbtxt"
BACKGROUND = "background"
_TOKEN = re.compile(r"""\s+|\#[^\n]*|(?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")|(?P<word>[\w.+-]+)"""
                    r"""|(?P<mark>[{}<>:;,\[\]])""")
_ESCAPES = {"\\": "\\\\", "'": "\\'", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f", "v": "\v"}


def format_label_map(label_map: LabelMap) -> str:
    """The pbtxt of `label_map`, items by id; names single-quoted with text_format's C escapes."""
    quoted = ("".join(_ESCAPES.get(char, char) for char in name) for name in label_map.names)
    return "".join(f"item {{\n  id: {i}\n  name: '{name}'\n}}\n" for i, name in zip(label_map.ids, quoted))


def _tokens(text: str) -> list[str]:
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ValueError(f"cannot read {text[position:position + 20]!r} at character {position}")
        position = match.end()
        if match.lastgroup:
            tokens.append(match.group())
    return tokens


def _unquote(token: str) -> str:
    """A quoted string's value: C escapes (\\n, \\', \\\\, octal \\ooo and \\xhh bytes of UTF-8) undone."""
    raw, out, i = token[1:-1], bytearray(), 0
    while i < len(raw):
        char = raw[i]
        if char != "\\":
            out += char.encode()
            i += 1
            continue
        code = raw[i + 1]
        octal = re.match(r"[0-7]{1,3}", raw[i + 1:])
        if octal:
            out.append(int(octal.group(), 8) & 0xFF)
            i += 1 + len(octal.group())
        elif code == "x":
            digits = re.match(r"[0-9a-fA-F]{1,2}", raw[i + 2:])
            if not digits:
                raise ValueError(f"bad escape in {token}")
            out.append(int(digits.group(), 16))
            i += 2 + len(digits.group())
        else:
            out += _UNESCAPES.get(code, code).encode()
            i += 2
    return out.decode("utf-8")


def _fields(tokens: list[str], start: int, closing: str) -> tuple[list[tuple[str, object]], int]:
    """The (name, value) fields of one message body and the position of its `closing` token; a nested message's
    value is its own fields."""
    fields, i = [], start
    while i < len(tokens) and tokens[i] != closing:
        name = tokens[i]
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise ValueError(f"expected a field name, got {name!r}")
        i += 1 + (i + 1 < len(tokens) and tokens[i + 1] == ":")
        if i < len(tokens) and tokens[i] in "{<":
            nested, i = _fields(tokens, i + 1, "}" if tokens[i] == "{" else ">")
            fields.append((name, nested))
        elif i < len(tokens) and tokens[i] == "[":  # a repeated scalar's list: skipped whole
            i = tokens.index("]", i)
            fields.append((name, None))
        elif i < len(tokens):
            value: object = tokens[i]
            if tokens[i][:1] in "'\"":
                parts = [_unquote(tokens[i])]
                while i + 1 < len(tokens) and tokens[i + 1][:1] in "'\"":  # 'a' "b" is 'ab', as text_format reads it
                    i += 1
                    parts.append(_unquote(tokens[i]))
                value = "".join(parts)
            fields.append((name, value))
        i += 1
        while i < len(tokens) and tokens[i] in ",;":
            i += 1
    if closing and i >= len(tokens):
        raise ValueError(f"a message is not closed with {closing!r}")
    return fields, i


def parse_label_map(text: str) -> LabelMap:
    """The `LabelMap` of a label_map.pbtxt's text (module docstring); ValueError saying what is wrong."""
    items, _ = _fields(_tokens(text), 0, "")
    found: dict[str, int] = {}
    for field, body in items:
        if field != "item" or not isinstance(body, list):
            raise ValueError(f"a label map holds `item {{...}}` messages, got field {field!r}")
        values = {key: value for key, value in body if key in ("id", "name", "display_name")}
        if "id" not in values:
            raise ValueError(f"an item has no id: {values}")
        item_id, name = int(str(values["id"]), 0), str(values.get("name", values.get("display_name", "")))
        if item_id < 0:
            raise ValueError(f"label map ids should be >= 0, got {item_id} ({name!r})")
        if item_id == 0:
            if BACKGROUND not in (name, values.get("display_name")):
                raise ValueError(f"label map id 0 is reserved for the background label, got {name!r}")
            continue
        if name in found:
            raise ValueError(f"name {name!r} has two ids, {found[name]} and {item_id}")
        found[name] = item_id
    return LabelMap(found)


def write_label_map(model_dir: str | os.PathLike, label_map: LabelMap) -> None:
    storage.write_text(storage.join(model_dir, LABEL_MAP_NAME), format_label_map(label_map))


def read_label_map(path: str | os.PathLike) -> LabelMap:
    """The label map in the pbtxt at `path`; ValueError naming the file when it cannot be read as one."""
    try:
        return parse_label_map(storage.read_text(path))
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{os.fspath(path)}: not a label map: {err}") from None


def model_label_map(model_dir: str | os.PathLike, info: ModelInfo) -> LabelMap:
    """A detector's label map: its `label_map.pbtxt`; a model exported before the file existed served its
    `class_names` as ids 1..K. ValueError when the file disagrees with the model's class names."""
    path = storage.join(model_dir, LABEL_MAP_NAME)
    if not storage.is_file(path):
        return LabelMap.of_names(info.class_names)
    found = read_label_map(path)
    if list(found.names) != list(info.class_names):
        raise ValueError(f"{os.fspath(path)}: classes {list(found.names)} in id order, but the model serves "
                         f"{list(info.class_names)}")
    return found
