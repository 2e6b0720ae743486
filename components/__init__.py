"""tpu-vllm's components: one concern per module."""
