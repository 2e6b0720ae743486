"""vLLM's --gpu-memory-utilization stays at or under the build log's measured ceiling, on the VM's command and
in every Kubernetes container."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

try:
    from .resource_view import COMMAND_TYPES
    from .shell_commands import command_texts, flags_of, shell_words
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    from resource_view import COMMAND_TYPES
    from shell_commands import command_texts, flags_of, shell_words

# The build log: 0.95 fails XLA program allocation ~691 s in; 0.92 is the measured ceiling.
MAX_GPU_MEMORY_UTILIZATION = 0.92


def _container_argvs(value: Any) -> Iterator[list[str]]:
    """command + args of every container in a Kubernetes object, wherever its pod template sits."""
    if isinstance(value, Mapping):
        for key in ("initContainers", "containers", "ephemeralContainers"):
            for container in value.get(key) or []:
                if isinstance(container, Mapping):
                    yield [str(word) for word in [*(container.get("command") or []), *(container.get("args") or [])]]
        for item in value.values():
            yield from _container_argvs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _container_argvs(item)


def gpu_memory_utilization_capped(type_: str, props: Mapping[str, Any],
                                  config: Mapping[str, Any] | None = None) -> list[str]:
    """The VM's remote command and every Kubernetes container's argv (the gke wing's pods)."""
    if type_ in COMMAND_TYPES:
        argvs = [shell_words(text) for text in command_texts(props)]
    elif type_.startswith("kubernetes:"):
        argvs = list(_container_argvs(props))
    else:
        return []
    violations = []
    for words in argvs:
        for _, name, value in flags_of(words):
            if name != "--gpu-memory-utilization" or value is None:
                continue
            try:
                fraction = float(value)
            except ValueError:
                continue  # vLLM refuses to start with it
            if fraction > MAX_GPU_MEMORY_UTILIZATION:
                violations.append(f"the serve command sets --gpu-memory-utilization {value}: above 0.92 the "
                                  "build log saw XLA program allocation fail (~691 s in at 0.95); set "
                                  "tpu-vllm:vllm.gpuMemoryUtilization to 0.92")
    return violations
