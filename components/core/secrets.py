"""Secret Manager secrets (HF token, vLLM API key) and their secret-level IAM bindings."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_gcp as gcp
import pulumi_random as random

from components.core import lookup_answers

ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"


def hf_token_secret_id(prefix: str) -> str:
    """The stack's own HF token secret (when it keeps the token)."""
    return f"{prefix}-hf-token"


def api_key_secret_id(prefix: str) -> str:
    return f"{prefix}-api-key"


def ssh_host_key_secret_id(prefix: str) -> str:
    """The vm node's SSH host key (components/vm/host_key.py)."""
    return f"{prefix}-ssh-host-key"


@dataclass
class StackSecretsArgs:
    project: str
    prefix: str
    """Secret ids start with this (one set per stack)."""
    serving_account_email: pulumi.Input[str]
    hf_token: pulumi.Output[str] | None
    """A Pulumi secret; when given, the stack keeps the version itself."""
    existing_hf_token_secret: str
    """Otherwise the id of a secret made by hand (`gcloud secrets create hf-token ...`)."""
    labels: dict[str, str] = field(default_factory=dict)
    existing_hf_token_secret_is_secret: bool = False
    """The id was set with --secret: it then reaches state, metadata, outputs and errors only as a Pulumi secret."""


class StackSecrets(pulumi.ComponentResource):
    """Only the serving identity (the VM's or the pods' account) can read the secrets, and only these ones."""

    hf_token_secret_name: pulumi.Output[str]
    """projects/<project>/secrets/<id>: what the startup script reads."""
    api_key_secret_name: pulumi.Output[str]
    api_key: pulumi.Output[str]
    hf_token_source: str
    """Which token the VM reads; names a hand-made secret only if its id is not itself a secret."""

    def __init__(self, name: str, args: StackSecretsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-vllm:secrets:StackSecrets", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        member = pulumi.Output.concat("serviceAccount:", args.serving_account_email)

        if args.hf_token is not None:
            hf_secret = self._secret(f"{name}-hf-token", hf_token_secret_id(args.prefix), args, child)
            gcp.secretmanager.SecretVersion(
                f"{name}-hf-token-version",
                secret=hf_secret.id,
                secret_data=pulumi.Output.secret(args.hf_token),
                opts=child,
            )
            hf_secret_id: pulumi.Input[str] = hf_secret.secret_id
            self.hf_token_source = f"managed by the stack (secret {hf_token_secret_id(args.prefix)})"
        else:
            secret_id = args.existing_hf_token_secret
            hidden = args.existing_hf_token_secret_is_secret
            _require_existing_secret(args.project, secret_id, hidden)
            hf_secret_id = pulumi.Output.secret(secret_id) if hidden else secret_id
            shown_id = _shown_secret_id(secret_id, hidden)
            self.hf_token_source = (
                f"your secret {'(id kept as a Pulumi secret)' if hidden else repr(secret_id)}, made by hand: "
                f"printf '%s' \"$HF_TOKEN\" | gcloud secrets create {shown_id} --data-file=- --project={args.project}"
            )
        self._grant(f"{name}-hf-token-accessor", args.project, hf_secret_id, member, child)

        api_key = random.RandomPassword(
            f"{name}-api-key", length=48, special=False, opts=child
        )
        api_secret = self._secret(f"{name}-api-key", api_key_secret_id(args.prefix), args, child)
        gcp.secretmanager.SecretVersion(
            f"{name}-api-key-version", secret=api_secret.id, secret_data=api_key.result, opts=child
        )
        self._grant(f"{name}-api-key-accessor", args.project, api_secret.secret_id, member, child)

        self.hf_token_secret_name = pulumi.Output.concat(
            "projects/", args.project, "/secrets/", hf_secret_id
        )
        self.api_key_secret_name = pulumi.Output.concat(
            "projects/", args.project, "/secrets/", api_secret.secret_id
        )
        self.api_key = pulumi.Output.secret(api_key.result)
        self.register_outputs({
            "hf_token_secret_name": self.hf_token_secret_name,
            "api_key_secret_name": self.api_key_secret_name,
        })

    @staticmethod
    def _secret(name: str, secret_id: str, args: StackSecretsArgs, opts: pulumi.ResourceOptions):
        return gcp.secretmanager.Secret(
            name,
            project=args.project,
            secret_id=secret_id,
            replication={"auto": {}},
            labels=args.labels,
            opts=opts,
        )

    @staticmethod
    def _grant(name, project, secret_id, member, opts) -> gcp.secretmanager.SecretIamMember:
        return gcp.secretmanager.SecretIamMember(
            name, project=project, secret_id=secret_id, role=ACCESSOR_ROLE, member=member, opts=opts
        )


def secret_for_one_reader(name: str, *, project: str, secret_id: str, value: pulumi.Output[str],
                          reader_email: pulumi.Input[str], labels: dict[str, str],
                          opts: pulumi.ResourceOptions) -> gcp.secretmanager.Secret:
    """A secret the stack keeps (its one version is `value`, a Pulumi secret) that only `reader_email` may
    read, as the two above: how a further secret reaches the node (the vm wing's SSH host key)."""
    secret = gcp.secretmanager.Secret(name, project=project, secret_id=secret_id, replication={"auto": {}},
                                      labels=labels, opts=opts)
    gcp.secretmanager.SecretVersion(f"{name}-version", secret=secret.id, secret_data=pulumi.Output.secret(value),
                                    opts=opts)
    StackSecrets._grant(f"{name}-accessor", project, secret.secret_id,
                        pulumi.Output.concat("serviceAccount:", reader_email), opts)
    return secret


def _shown_secret_id(secret_id: str, hidden: bool) -> str:
    """The id as a user can type it: a secret id is read back from the config instead of printed."""
    return '"$(pulumi config get tpu-vllm:hfTokenSecret)"' if hidden else secret_id


def _require_existing_secret(project: str, secret_id: str, hidden: bool = False) -> None:
    """Fail at preview, before anything is created, if the hand-made secret is not there.

    Looks up the secret's metadata only; its value never enters the program.
    """
    try:
        gcp.secretmanager.get_secret(project=project, secret_id=secret_id)
    except Exception as error:  # noqa: BLE001 - the provider's own words (not the layers' wrapping) are the reason
        said = lookup_answers.reason(error)
        reason = said.replace(secret_id, "[secret]") if hidden else said
        shown_id = _shown_secret_id(secret_id, hidden)
        raise pulumi.RunError(
            f"tpu-vllm:hfTokenSecret = {'[secret]' if hidden else repr(secret_id)}: cannot read that secret in "
            f"project {project} ({reason}). Create it: printf '%s' \"$HF_TOKEN\" | gcloud secrets create {shown_id} "
            f"--data-file=- --project={project}; or let the stack keep the token: "
            "pulumi config set --secret tpu-vllm:hfToken"
        ) from None
