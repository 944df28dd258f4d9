"""Beam's function-parameter memo (core/beam_introspection.py): the same answers, and pipelines that still run.

The memo changes nothing but time: every answer must equal Beam's own, a stateful DoFn must still be
recognised as stateful (Beam finds its state in its methods' default values), and a pipeline built after
the memo is installed must compute the same thing on the FnApiRunner.
"""
from __future__ import annotations

import functools
import gc

import apache_beam as beam
import pytest
from apache_beam.coders import VarIntCoder
from apache_beam.transforms import core as beam_core
from apache_beam.transforms import userstate
from apache_beam.options.pipeline_options import PipelineOptions

from shardflow.core import beam_introspection
from shardflow.core.beam_setup import make_pipeline

pytestmark = pytest.mark.unit

BEAMS_OWN = beam_introspection._BEAMS_OWN


class Counting(beam.DoFn):
    """A stateful DoFn: the running count of each key's elements."""

    SEEN = userstate.ReadModifyWriteStateSpec("seen", VarIntCoder())

    def process(self, element, seen=beam.DoFn.StateParam(SEEN)):  # noqa: ANN001, ANN201 (Beam's own signature)
        count = (seen.read() or 0) + 1
        seen.write(count)
        yield element[0], count


class Plain(beam.DoFn):
    def process(self, element, prefix="p", *rest, window=beam.DoFn.WindowParam):  # noqa: ANN001, ANN201
        yield prefix + str(element)


def _lambdas() -> list:
    return [lambda x, k=k: x + k for k in range(3)]  # one code object, three functions with their own defaults


def test_answers_equal_beams_own_for_functions_methods_and_other_callables() -> None:
    beam_introspection.memoize_function_arguments()
    callables = [Plain().process, Counting().process, Plain.process, functools.partial(Plain().process, 1),
                 len, *_lambdas(), beam.Map(str).fn.process]
    for function in callables:
        assert beam_core.get_function_args_defaults(function) == BEAMS_OWN(function), function
        assert beam_core.get_function_args_defaults(function) == BEAMS_OWN(function), function  # from the memo


def test_each_lambda_keeps_its_own_defaults() -> None:
    beam_introspection.memoize_function_arguments()
    answers = [beam_core.get_function_args_defaults(f) for f in _lambdas()]
    assert [defaults for _, defaults in answers] == [[0], [1], [2]]


def test_a_stateful_dofn_is_still_stateful() -> None:
    beam_introspection.memoize_function_arguments()
    for _ in range(2):  # the second look is answered from the memo
        assert userstate.is_stateful_dofn(Counting())
        assert not userstate.is_stateful_dofn(Plain())


def test_a_pipeline_built_after_it_computes_the_same(tmp_path) -> None:  # noqa: ANN001
    def counts() -> list:
        with make_pipeline(PipelineOptions([])) as pipeline:  # installs the memo
            _ = (pipeline | beam.Create([("a", 1), ("b", 2), ("a", 3), ("a", 4)])
                 | beam.ParDo(Counting()) | beam.combiners.ToList()
                 | beam.Map(lambda got: (tmp_path / "out").write_text(repr(sorted(got)))))
        return eval((tmp_path / "out").read_text())  # noqa: S307 (our own repr of tuples)

    assert counts() == counts() == [("a", 1), ("a", 2), ("a", 3), ("b", 1)]
    assert beam_core.get_function_args_defaults is beam_introspection.function_arguments


def test_the_memo_lets_a_pipelines_functions_go() -> None:
    beam_introspection.memoize_function_arguments()
    functions = _lambdas()
    for function in functions:
        beam_core.get_function_args_defaults(function)
    before = len(beam_introspection._functions)
    del functions, function
    gc.collect()
    assert len(beam_introspection._functions) <= before - 3
