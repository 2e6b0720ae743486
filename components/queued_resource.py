"""The provider's old import path, kept for stacks made before components/vm/ existed.

Pulumi stores a dynamic provider in state by reference (module and class name), and
reads it back from there on refresh and destroy; without this name those fail.
"""

from components.vm.queued_resource import QueuedResourceProvider

__all__ = ["QueuedResourceProvider"]
