"""tpu-vllm: flex-start TPU v5e serving gemma-4-E2B-it with vLLM, on one VM or on GKE.

Thin on purpose: settings in, the shared core (APIs, identity, secrets), the chosen platform's wing,
outputs out.
"""

import pulumi

from components.identity import VmIdentity, VmIdentityArgs
from components.secrets import StackSecrets, StackSecretsArgs
from components.services import ProjectServices
from components.settings import SettingsError, from_pulumi_config
from components.vm.deployment import VmDeployment

try:
    loaded = from_pulumi_config()
except SettingsError as error:
    raise pulumi.RunError(error.render()) from None
for warning in loaded.warnings:
    pulumi.log.warn(warning)
cfg = loaded.settings
prefix = cfg.resource_prefix
labels = {"app": "tpu-vllm", "stack": cfg.stack.lower(), **cfg.tpu.labels}

services = ProjectServices("services", cfg.project)
after_services = pulumi.ResourceOptions(depends_on=services.services)

identity = VmIdentity("vm", VmIdentityArgs(project=cfg.project, account_id=f"{prefix}-vm"[:30]),
                      after_services)
secrets = StackSecrets(
    "secrets",
    StackSecretsArgs(
        project=cfg.project,
        prefix=prefix,
        vm_service_account_email=identity.email,
        hf_token=pulumi.Output.secret(cfg.hf_token.get_secret_value()) if cfg.hf_token else None,
        existing_hf_token_secret=cfg.hf_token_secret,
        labels=labels,
    ),
    after_services,
)

wing = VmDeployment(cfg, labels, services, identity, secrets)

for name, value in wing.outputs.items():
    pulumi.export(name, value)
