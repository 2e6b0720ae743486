"""tpu-vllm: one flex-start TPU v5e chip serving gemma-4-E2B-it with vLLM.

Thin on purpose: settings in, components built, outputs out.
"""

from pathlib import Path

import pulumi

from components import budget
from components.identity import VmIdentity, VmIdentityArgs
from components.secrets import StackSecrets, StackSecretsArgs
from components.services import ProjectServices
from components.settings import SettingsError, from_pulumi_config
from components.vm import boot_contract, container
from components.vm.cache_disk import CacheDisk, CacheDiskArgs
from components.vm.network import NodeFirewall, NodeFirewallArgs
from components.vm.queued_resource import TpuNode, TpuNodeArgs, gcloud_equivalent, queued_resource_body
from components.vm.ssh_access import SshAccess, SshAccessArgs
from components.vm.vllm_server import VllmServer, VllmServerArgs

try:
    loaded = from_pulumi_config()
except SettingsError as error:
    raise pulumi.RunError(error.render()) from None
for warning in loaded.warnings:
    pulumi.log.warn(warning)
cfg = loaded.settings
prefix = cfg.resource_prefix
labels = {"app": "tpu-vllm", "stack": cfg.stack.lower(), **cfg.tpu.labels}
node_tag = prefix

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
cache = CacheDisk(
    "cache",
    CacheDiskArgs(project=cfg.project, zone=cfg.tpu.zone, name=f"{prefix}-cache",
                  size_gb=cfg.cache.size_gb, disk_type=cfg.cache.disk_type,
                  keep_on_destroy=cfg.cache.keep_on_destroy, labels=labels),
    after_services,
)
firewall = NodeFirewall(
    "firewall",
    NodeFirewallArgs(project=cfg.project, network=cfg.tpu.network, name_prefix=prefix,
                     target_tag=node_tag, serving_port=cfg.vllm.port,
                     ssh_source_ranges=cfg.access.ssh_source_ranges,
                     internal_source_ranges=cfg.access.internal_source_ranges,
                     serving_source_ranges=cfg.access.serving_source_ranges,
                     ssh_from_anywhere_allowed=cfg.access.allow_ssh_from_anywhere,
                     public_serving_allowed=cfg.access.allow_public_serving),
    after_services,
)
ssh = SshAccess(
    "ssh",
    SshAccessArgs(
        user=cfg.access.ssh_user,
        public_key=cfg.access.ssh_public_key,
        private_key=(pulumi.Output.secret(cfg.ssh_private_key.get_secret_value())
                     if cfg.ssh_private_key else None),
    ),
)

startup_script = (Path(__file__).parent / "startup" / "startup.sh").read_text()
body = pulumi.Output.all(
    identity.email, cache.source_disk, secrets.hf_token_secret_name,
    secrets.api_key_secret_name, ssh.ssh_keys_metadata,
).apply(lambda values: queued_resource_body(
    project=cfg.project,
    zone=cfg.tpu.zone,
    node_id=cfg.node_id,
    accelerator_type=cfg.tpu.accelerator_type,
    runtime_version=cfg.tpu.runtime_version,
    provisioning_model=cfg.tpu.provisioning_model,
    run_seconds=cfg.tpu.run_seconds,
    queue_seconds=cfg.tpu.queue_seconds,
    network=cfg.tpu.network,
    subnetwork=cfg.tpu.subnetwork,
    service_account_email=values[0],
    metadata=boot_contract.node_metadata(
        startup_script=startup_script, ssh_keys=values[4], hf_token_secret=values[2],
        api_key_secret=values[3], cache_device=cfg.cache.device_name, cache_mount=cfg.cache.mount_point,
        image=cfg.vllm.image,
    ),
    data_disks=[values[1]],
    tags=[node_tag],
    labels=labels,
))
node = TpuNode(
    "tpu",
    TpuNodeArgs(
        body=body,
        parent=f"projects/{cfg.project}/locations/{cfg.tpu.zone}",
        queued_resource_id=cfg.node_id,
        queue_seconds=cfg.tpu.queue_seconds,
    ),
    pulumi.ResourceOptions(depends_on=[secrets, cache, firewall, *services.services]),
)
server = VllmServer(
    "vllm",
    VllmServerArgs(settings=cfg, host=node.external_ip, node_name=node.node_name,
                   ssh_user=cfg.access.ssh_user, ssh_private_key=ssh.private_key),
)

kv = cfg.kv_budget()
pricing = cfg.tpu.provisioning_model
port = cfg.vllm.port
key_file = f"~/.ssh/{prefix}"
ssh_target = pulumi.Output.concat(cfg.access.ssh_user, "@", node.external_ip)
pulumi.export("gcloudEquivalent", body.apply(lambda b: gcloud_equivalent(b, cfg.node_id)))
pulumi.export("nodeName", node.node_name)
pulumi.export("queuedResourceState", node.state)
# The plain name, so tools.status finds the request in any state (nodeName is empty unless ACTIVE).
pulumi.export("queuedResourceName",
              f"projects/{cfg.project}/locations/{cfg.tpu.zone}/queuedResources/{cfg.node_id}")
pulumi.export("runEndsAt", node.termination_time)
pulumi.export("internalEndpoint", pulumi.Output.concat("http://", node.internal_ip, f":{port}/v1"))
if cfg.access.serving_source_ranges:
    pulumi.export("externalEndpoint", pulumi.Output.concat("http://", node.external_ip, f":{port}/v1"))
pulumi.export("sshPrivateKeySetup",
              f"pulumi stack output sshPrivateKey --show-secrets > {key_file} && chmod 600 {key_file}")
pulumi.export("sshPrivateKey", ssh.private_key)
pulumi.export("sshCommand", pulumi.Output.concat(f"ssh -i {key_file} ", ssh_target))
pulumi.export("sshTunnelCommand", pulumi.Output.concat(
    f"ssh -i {key_file} -N -L {port}:127.0.0.1:{port} ", ssh_target))
pulumi.export("localEndpoint", f"http://127.0.0.1:{port}/v1")
pulumi.export("apiKey", secrets.api_key)
pulumi.export("hfTokenSource", secrets.hf_token_source)
pulumi.export("vllmServeCommand", server.serve_command)
pulumi.export("dockerRunCommand", container.render_docker_command(cfg))
pulumi.export("costPerHourUsd", budget.cost_per_hour_usd(pricing))
if pricing == "flex-start":
    pulumi.export("maxSpendPerRunUsd", round(budget.max_spend_usd(pricing, cfg.tpu.run_seconds), 2))
if kv is not None:
    pulumi.export("kvBytesPerToken", kv.kv_bytes_per_token)
    pulumi.export("kvTokens", kv.kv_tokens)
    pulumi.export("kvPoolGib", round(budget.gib(kv.kv_pool_bytes), 2))
    pulumi.export("hbmCapGib", round(budget.gib(kv.hbm_cap_bytes), 2))
    pulumi.export("concurrencyGuidance", (
        f"keep clients x context under {kv.load_limit_tokens:,} tokens (78% of {kv.kv_tokens:,}); "
        f"e.g. 16 agents at {kv.load_limit_tokens // 16:,} tokens each"))
