"""Developers' tools: the bench client's ceiling check and the fake streaming server it and the tests use."""
