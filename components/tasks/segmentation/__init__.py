"""Masks: one class per pixel (a one-channel mask image beside each image)."""
from .task import SegmentationTask

__all__ = ["SegmentationTask"]
