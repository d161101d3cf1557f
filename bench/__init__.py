"""Vicar's benchmarks and research scripts, one package: run each from the repository's
root as `python -m bench.<name>` (e.g. `python -m bench.gate_bench --help`). They import
each other as `bench.<name>` and the product through its public names only
(tests/test_bench_package.py). Nothing is imported here: the workflow sandbox re-imports
this package with bench/floor_workflow.py for every run."""
