"""toolweave benchmarks (`python -m benchmarks`)."""
