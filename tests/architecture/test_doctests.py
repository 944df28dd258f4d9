"""Every module's docstring examples run as tests (configs can be built anywhere, away from the data)."""
from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import shardflow

MODULES = sorted(m.name for m in pkgutil.walk_packages(shardflow.__path__, "shardflow.")
                 if not m.name.endswith("__main__"))  # __main__ runs the command line when imported


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed"


def test_the_examples_are_found() -> None:
    """Guards the list itself: the core's storage modules are among those with examples."""
    with_examples = [n for n in MODULES if doctest.DocTestFinder().find(importlib.import_module(n))[0].examples]
    assert {"shardflow.core.uri", "shardflow.core.storage", "shardflow.core.output_dir"} <= set(with_examples)
    assert len(MODULES) > 80
