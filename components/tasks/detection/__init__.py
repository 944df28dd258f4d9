"""Boxes: classes and boxes per image (the box features of core/box_schema.py), scored as COCO scores them."""
from .task import DetectionTask

__all__ = ["DetectionTask"]
