"""The SSH key pulumi-command uses: generated per stack (ED25519) or supplied by the user."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_tls as tls


@dataclass
class SshAccessArgs:
    user: str
    public_key: str | None = None
    private_key: pulumi.Output[str] | None = None
    """A Pulumi secret, with public_key; otherwise a key is generated."""


class SshAccess(pulumi.ComponentResource):
    public_key: pulumi.Output[str]
    private_key: pulumi.Output[str]
    ssh_keys_metadata: pulumi.Output[str]
    """`user:key`, the node's ssh-keys metadata value."""

    def __init__(self, name: str, args: SshAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:access:SshAccess", name, None, opts)
        if args.public_key is not None and args.private_key is not None:
            self.public_key = pulumi.Output.from_input(args.public_key)
            self.private_key = pulumi.Output.secret(args.private_key)
        else:
            key = tls.PrivateKey(
                f"{name}-key", algorithm="ED25519", opts=pulumi.ResourceOptions(parent=self)
            )
            self.public_key = key.public_key_openssh.apply(str.strip)
            self.private_key = pulumi.Output.secret(key.private_key_openssh)
        self.ssh_keys_metadata = self.public_key.apply(lambda public: f"{args.user}:{public}")
        self.register_outputs({"public_key": self.public_key})
