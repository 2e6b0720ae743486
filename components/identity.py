"""The TPU VM's own identity: a dedicated service account with no project-level roles."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass
class VmIdentityArgs:
    project: str
    account_id: str
    """6-30 characters; one account per stack."""
    display_name: str = "tpu-vllm TPU VM"
    """What the console shows for the account."""
    description: str = "Runs the TPU VM; reads only its own secrets."
    """Why the account exists."""


class VmIdentity(pulumi.ComponentResource):
    """Access is granted per secret (components/secrets.py), never on the project."""

    account: gcp.serviceaccount.Account
    email: pulumi.Output[str]

    def __init__(self, name: str, args: VmIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:identity:VmIdentity", name, None, opts)
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


def account_id(prefix: str, suffix: str) -> str:
    """A service account id (6-30 characters) that keeps its suffix however long the stack's name is."""
    return f"{prefix[:29 - len(suffix)].rstrip('-')}-{suffix}"
