"""tpu-vllm: flex-start TPU v5e serving gemma-4-E2B-it with vLLM, on one VM or on GKE.

Thin on purpose: settings in, the shared core (APIs, identity, secrets), the chosen platform's wing,
outputs out.
"""

import pulumi

from components import naming
from components.identity import VmIdentity, VmIdentityArgs
from components.secrets import StackSecrets, StackSecretsArgs
from components.services import GKE_APIS, ProjectServices
from components.settings import Loaded, SettingsError, from_pulumi_config
from components.vm.deployment import VmDeployment


def run() -> Loaded:
    """Register the whole stack from the running stack's config; returns the settings and their warnings.

    Raises SettingsError before registering anything when the config is invalid. The offline plan
    (tools/plan/engine.py) calls this under its engine; the Pulumi CLI runs this file as __main__.
    """
    loaded = from_pulumi_config()
    for warning in loaded.warnings:
        pulumi.log.warn(warning)
    cfg = loaded.settings
    # Every GCP id comes from the settings (components/naming.py), valid whatever the stack name.
    prefix = cfg.resource_prefix
    labels = cfg.labels
    on_gke = cfg.platform == "gke"

    services = ProjectServices("services", cfg.project, extra_apis=GKE_APIS if on_gke else ())
    after_services = pulumi.ResourceOptions(depends_on=services.services)

    if on_gke:
        identity = VmIdentity("workload", VmIdentityArgs(
            project=cfg.project, account_id=naming.stack_id(cfg.stack, "wl", limit=naming.LIMITS["service_account"]),
            display_name="tpu-vllm GKE workload",
            description="The vLLM pods' identity (Workload Identity): its own secrets and the cache bucket only."),
        after_services)
    else:
        identity = VmIdentity("vm", VmIdentityArgs(project=cfg.project, account_id=cfg.service_account_id),
                              after_services)
    secrets = StackSecrets(
        "secrets",
        StackSecretsArgs(
            project=cfg.project,
            prefix=prefix,
            vm_service_account_email=identity.email,
            hf_token=pulumi.Output.secret(cfg.hf_token.get_secret_value()) if cfg.hf_token else None,
            existing_hf_token_secret=cfg.hf_token_secret,
            existing_hf_token_secret_is_secret="hfTokenSecret" in loaded.secret_keys,
            labels=labels,
        ),
        after_services,
    )

    if on_gke:
        # Imported only here: the vm platform never loads pulumi-kubernetes.
        from components.gke.deployment import GkeDeployment, GkeDeploymentArgs

        wing = GkeDeployment("gke", GkeDeploymentArgs(settings=cfg, services=services.services,
                                                      workload_identity=identity, secrets=secrets, labels=labels))
    else:
        wing = VmDeployment(cfg, labels, services, identity, secrets)

    for name, value in wing.outputs.items():
        pulumi.export(name, value)
    return loaded


# pulumi-language-python-exec runs the program with runpy.run_path(PROGRAM, run_name="__main__").
if __name__ == "__main__":
    try:
        run()
    except SettingsError as error:
        raise pulumi.RunError(error.render()) from None
