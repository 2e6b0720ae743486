"""What a user runs: the offline plan (`plan/`), the benchmark (`bench/`) and `status`."""
