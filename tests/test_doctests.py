"""The docstring examples of the core modules run as tests (configs can be built anywhere)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import shardflow.core

CORE_MODULES = sorted(f"shardflow.core.{m.name}" for m in pkgutil.iter_modules(shardflow.core.__path__))


@pytest.mark.parametrize("name", CORE_MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"
