"""Class labels: one class per example (a value column, integers or strings through a vocabulary)."""
from .task import ClassificationTask

__all__ = ["ClassificationTask"]
