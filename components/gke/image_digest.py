"""The resolver's old import path, kept for gke stacks made before it moved to components/core/image_digest.py
(both wings pin the vLLM image now).

Pulumi stores a dynamic provider in state by reference (module and class name) and reads it back from there on
refresh and destroy; without this name those fail.
"""

from components.core.image_digest import ImageDigestProvider

__all__ = ["ImageDigestProvider"]
