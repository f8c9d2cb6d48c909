"""Benchmarks: `make bench` runs every bench_*.py module and prints its figures."""
