"""Benchmarks: documented commands that print their figures (last line JSON)."""
