"""Peer comparison: the same workloads through toolweave and through each peer library
(`python -m benchmarks.peers [--quick]`, `make bench-peers`)."""
