"""The single-VM wing: one flex-start TPU VM through a queued resource, served over SSH."""
