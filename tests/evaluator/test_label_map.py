"""The label map's one owner (core/box_schema.py's `LabelMap`) and its file (core/label_map_file.py)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from shardflow.core.box_schema import LabelMap
from shardflow.core.label_map_file import (LABEL_MAP_NAME, format_label_map, model_label_map, parse_label_map,
                                           write_label_map)
from shardflow.core.model_info import ModelInfo

pytestmark = pytest.mark.unit

HAND_WRITTEN = """# written by hand, as in the OD API's data/*.pbtxt
item {
  name: "tri"   # the id comes second here
  id: 12
  display_name: "Triangle"
}
item: { id: 0 name: 'background' }
item <
  id: 3; name: 'di' "sc"
  keypoints { id: 0 label: "centre" }
  ancestor_ids: [1, 2]
>
item {
  id: 7,
  display_name: 'Square'
  name: 'squ\\141re'
}
"""


def _od_api_label_map_class() -> type:
    """The OD API's StringIntLabelMap (protos/string_int_label_map.proto: item, name = 1, id = 2,
    display_name = 3), built here so protobuf's own text_format parses what shardflow writes."""
    proto = descriptor_pb2.FileDescriptorProto(name="string_int_label_map_test.proto", package="odapi_test")
    item = proto.message_type.add(name="StringIntLabelMapItem")
    fields = (("name", 1, "TYPE_STRING"), ("id", 2, "TYPE_INT32"), ("display_name", 3, "TYPE_STRING"))
    for name, number, kind in fields:
        item.field.add(name=name, number=number, type=getattr(descriptor_pb2.FieldDescriptorProto, kind),
                       label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    holder = proto.message_type.add(name="StringIntLabelMap")
    holder.field.add(name="item", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                     label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
                     type_name=".odapi_test.StringIntLabelMapItem")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("odapi_test.StringIntLabelMap"))


def test_the_class_index_is_the_rank_of_the_id_and_the_served_class_the_id() -> None:
    labels = LabelMap({"tri": 12, "disc": 3, "square": 7})
    assert labels.ids == (3, 7, 12) and labels.names == ("disc", "square", "tri")
    assert labels.training_ids(np.array([7.0, 12.0, 3.0])).tolist() == [1, 2, 0]
    assert labels.served_ids([2, 1, 0]).tolist() == [12, 7, 3]
    for outside in (1, 5, 13, 0):  # an id between, below or above the map's: never another class
        with pytest.raises(ValueError, match=f"label id {outside} is not in the label map {{disc: 3, square: 7"):
            labels.training_ids([3, outside])
    with pytest.raises(ValueError, match="unique and >= 1"):
        LabelMap({"a": 1, "b": 1})
    assert LabelMap.of_names(["x", "y"]).ids_by_name == {"x": 1, "y": 2}


def test_a_hand_written_pbtxt_reads_with_comments_display_names_and_ids_out_of_order() -> None:
    assert parse_label_map(HAND_WRITTEN) == LabelMap({"disc": 3, "square": 7, "tri": 12})
    for bad, said in (("item { id: -1 name: 'a' }", ">= 0"), ("item { id: 0 name: 'cat' }", "background"),
                      ("item { name: 'a' }", "no id"), ("item { id: 1 name: 'a' } item { id: 2 name: 'a' }", "two ids"),
                      ("item { id: 1 name: 'a' ", "not closed"), ("label { id: 1 }", "item")):
        with pytest.raises(ValueError, match=said):
            parse_label_map(bad)


def test_what_shardflow_writes_is_what_the_od_api_parser_reads() -> None:
    names = {"disc": 3, "it's": 12, 'say "hi"': 7, "back\\slash": 20, "café": 1}
    text = format_label_map(LabelMap(names))
    assert text.startswith("item {\n  id: 1\n  name: 'café'\n}\nitem {\n  id: 3\n  name: 'disc'\n}\n")
    parsed = text_format.Merge(text, _od_api_label_map_class()())
    assert {item.name: item.id for item in parsed.item} == names
    assert parse_label_map(text) == LabelMap(names)
    assert parse_label_map(text_format.MessageToString(parsed, as_utf8=True)) == LabelMap(names)


def test_a_model_s_label_map_is_its_file_or_its_class_names_from_one(tmp_path: Path) -> None:
    info = ModelInfo(task="detection", label="image/object", num_classes=2, class_names=["disc", "tri"])
    assert model_label_map(tmp_path, info) == LabelMap({"disc": 1, "tri": 2})  # exported before the file
    write_label_map(tmp_path, LabelMap({"tri": 12, "disc": 3}))
    assert (tmp_path / LABEL_MAP_NAME).read_text().count("item {") == 2
    assert model_label_map(tmp_path, info) == LabelMap({"disc": 3, "tri": 12})
    other = ModelInfo(task="detection", label="image/object", num_classes=2, class_names=["tri", "disc"])
    with pytest.raises(ValueError, match="classes \\['disc', 'tri'\\] in id order"):
        model_label_map(tmp_path, other)
