"""Benchmarks: each module prints figures (`python -m bench.NAME [--json]`); none is a test."""
