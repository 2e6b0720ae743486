"""`tpu-vllm:front`: the key-checking front on the serving port."""

from __future__ import annotations

from pydantic import Field, field_validator

from components import front
from components.settings.fields import _Section, pullable_image


class FrontSettings(_Section):
    """The key-checking front on the serving port (config key `tpu-vllm:front`); vLLM itself listens on loopback."""

    image: str = front.DEFAULT_IMAGE
    """The proxy's container: nginx's official image."""

    @field_validator("image")
    @classmethod
    def _image_reference(cls, value: str) -> str:
        return pullable_image(value, front.DEFAULT_IMAGE)
    upstream_port: int = Field(8001, ge=1, le=65535)
    """vLLM's port on 127.0.0.1, behind the front; vllm.port is the front's."""
