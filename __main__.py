"""tpu-vllm: flex-start TPU v5e serving gemma-4-E2B-it with vLLM, on one VM or on GKE.

Thin on purpose: settings -> the shared core (APIs, identity, secrets) -> the chosen platform's wing -> its
outputs exported. Nothing else.
"""

import pulumi

from components.core.preview_access import preview_identity_access
from components.core.shared_resources import create_core
from components.settings import Loaded, SettingsError, from_pulumi_config


def run() -> Loaded:
    """Register the whole stack from the running stack's config; returns the settings and their warnings.

    Raises SettingsError before registering anything when the config is invalid. The offline plan
    (tools/plan/engine.py) calls this under its engine; the Pulumi CLI runs this file as __main__.
    """
    loaded = from_pulumi_config()
    for warning in loaded.warnings:
        pulumi.log.warn(warning)
    settings = loaded.settings
    core = create_core(settings, hf_token_secret_is_secret="hfTokenSecret" in loaded.secret_keys)
    if settings.platform == "gke":
        # Imported only here: the vm platform never loads pulumi-kubernetes.
        from components.gke.deployment import GkeWing, GkeWingArgs

        wing = GkeWing("gke", GkeWingArgs(settings=settings, core=core))
    else:
        from components.vm.deployment import VmWing, VmWingArgs

        wing = VmWing("tpu-vm", VmWingArgs(settings=settings, core=core))
    for name, value in wing.outputs.items():
        pulumi.export(name, value)
    # What the pull-request preview job's identity must be granted (docs/review.md).
    pulumi.export("previewIam", preview_identity_access(settings.platform, settings.resource_prefix,
                                                        settings.stack_manages_hf_token,
                                                        monitoring=settings.monitoring.enabled,
                                                        docker_hub_mirror=settings.gke.docker_hub_mirror,
                                                        node_api=settings.tpu.node_api))
    return loaded


# pulumi-language-python-exec runs the program with runpy.run_path(PROGRAM, run_name="__main__").
if __name__ == "__main__":
    try:
        run()
    except SettingsError as error:
        raise pulumi.RunError(error.render()) from None
