"""`tpu-vllm:front`: the key-checking front on the serving port."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from components.settings.fields import Port, _Section, image_reference

# The official image (a well-kept, small proxy); pin a tag or digest for repeatable boots.
DEFAULT_IMAGE = "nginx:1.28.0-alpine"


class FrontSettings(_Section):
    """The key-checking front on the serving port (config key `tpu-vllm:front`); vLLM itself listens on loopback."""

    config_key: ClassVar[str] = "front"

    image: image_reference(DEFAULT_IMAGE) = Field(DEFAULT_IMAGE, description=(
        "the key-checking proxy's container (nginx's official image); a pullable reference"))
    upstream_port: Port = Field(8001, description=(
        "vLLM's port on 127.0.0.1, behind the front (`vllm.port` is the front's); not `vllm.port` nor 22"))
