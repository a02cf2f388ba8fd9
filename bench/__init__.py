"""Benchmarks. `make bench` runs every bench/bench_*.py module (see bench/README.md)."""
