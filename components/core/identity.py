"""A service account of the stack (the VM's, the pods', the GKE nodes', the metrics adapter's), with no
project-level roles of its own: what it may do is granted beside it, per secret or per role."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

# The type this component was registered as when it was named VmIdentity: its alias keeps live stacks' URNs.
FORMER_TYPE = "tpu-vllm:identity:VmIdentity"


@dataclass
class ServiceIdentityArgs:
    project: str
    account_id: str
    """6-30 characters, from components/basis/naming.py service_account_id."""
    display_name: str = "tpu-vllm TPU VM"
    """What the console shows for the account."""
    description: str = "Runs the TPU VM; reads only its own secrets."
    """Why the account exists."""


class ServiceIdentity(pulumi.ComponentResource):
    """One dedicated service account; access is granted where it is used, never on the project here."""

    account: gcp.serviceaccount.Account
    email: pulumi.Output[str]

    def __init__(self, name: str, args: ServiceIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        # Alias(type_=...) keeps the parent and name; its children inherit it (the engine's inheritedChildAlias).
        renamed = pulumi.ResourceOptions(aliases=[pulumi.Alias(type_=FORMER_TYPE)])
        super().__init__("tpu-vllm:identity:ServiceIdentity", name, None, pulumi.ResourceOptions.merge(opts, renamed))
        self.account = gcp.serviceaccount.Account(
            f"{name}-sa",
            project=args.project,
            account_id=args.account_id,
            display_name=args.display_name,
            description=args.description,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.email = self.account.email
        self.register_outputs({"email": self.email})


def account_email(project: str, account_id: str) -> str:
    """A user-managed service account's email, known before the account exists (so a preview can show it)."""
    return f"{account_id}@{project}.iam.gserviceaccount.com"
