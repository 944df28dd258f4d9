"""Benchmarks run by `make bench` (`python -m benchmarks.run_all`); not part of the test suite.

Each benchmark is a *suite* module (e.g. `example_gen_suite`) that the generic orchestrator in
`run_all` calls; each contender of a suite runs in its own subprocess, watched by `monitor`.
"""
