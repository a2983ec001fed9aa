"""Benchmarks of taintkeeper's admission webhook (see bench/README.md)."""
