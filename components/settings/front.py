"""`tpu-vllm:front`: the key-checking front on the serving port."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field, field_validator

from components.settings.facts import SSH_PORT
from components.settings.fields import Port, _Section, image_reference
from components.settings.findings import InvalidSettingError

# The official image (a well-kept, small proxy); pin a tag or digest for repeatable boots.
DEFAULT_IMAGE = "nginx:1.28.0-alpine"


class FrontSettings(_Section):
    """The key-checking front on the serving port (config key `tpu-vllm:front`); vLLM itself listens on loopback."""

    config_key: ClassVar[str] = "front"

    image: image_reference(DEFAULT_IMAGE) = Field(DEFAULT_IMAGE, description=(
        "the key-checking proxy's container (nginx's official image); a pullable reference"))
    listen_port: Port = Field(8000, description=(
        "the serving port, the only one clients reach: the front's (was `vllm.port`, still "
        "read, with a warning); "
        "not 22, sshd's on the node (the containers share the host network)"))

    @field_validator("listen_port")
    @classmethod
    def _port_free_on_the_node(cls, value: int) -> int:
        if value == SSH_PORT:
            raise InvalidSettingError(
                "sshd listens on 22 on the node, and the containers share the host's network "
                "(--net=host): the front could not bind it, and the firewall rule for it would open "
                "SSH to the serving ranges",
                "use 8000",
            )
        return value
