"""The single-VM wing: cache disk, firewall, SSH key, the queued resource (its body is built here) and the
serving step, and the outputs a newcomer needs.

A plain class, not a ComponentResource, on purpose: a component would become the parent of these resources
and change every URN, so Pulumi would replace a live stack's disk, firewall and TPU. The resources keep the
names and the stack as parent that they had when __main__.py declared them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pulumi

from components import budget
from components.identity import VmIdentity, account_email
from components.secrets import StackSecrets
from components.services import ProjectServices
from components.settings import Settings
from components.vm import boot_contract, container
from components.vm.cache_disk import CacheDisk, CacheDiskArgs
from components.vm.network import NodeFirewall, NodeFirewallArgs
from components.vm.queued_resource import TpuNode, TpuNodeArgs, gcloud_equivalent, queued_resource_body
from components.vm.ssh_access import SshAccess, SshAccessArgs
from components.vm.vllm_server import VllmServer, VllmServerArgs

STARTUP_SCRIPT = Path(__file__).resolve().parents[2] / "startup" / "startup.sh"


class VmDeployment:
    """Everything the vm platform adds to the shared core; `outputs` is what the stack exports."""

    outputs: dict[str, Any]

    def __init__(self, cfg: Settings, labels: dict[str, str], services: ProjectServices,
                 identity: VmIdentity, secrets: StackSecrets):
        prefix = cfg.resource_prefix
        node_tag = cfg.network_tag
        after_services = pulumi.ResourceOptions(depends_on=services.services)

        cache = CacheDisk(
            "cache",
            CacheDiskArgs(project=cfg.project, zone=cfg.tpu.zone, name=cfg.cache_disk_name,
                          size_gb=cfg.cache.size_gb, disk_type=cfg.cache.disk_type,
                          keep_on_destroy=cfg.cache.keep_on_destroy, labels=labels,
                          owner_labels={key: labels[key] for key in ("app", "stack")}),
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

        startup_script = STARTUP_SCRIPT.read_text()
        # A structure whose leaves are inputs, not one apply over them: in a preview only the values that are
        # truly unknown (the generated SSH key of a new stack) are unknown, so the preview shows the rest and
        # the policy pack judges it. The email is known from the account id; the account is a dependency.
        body = queued_resource_body(
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
            service_account_email=account_email(cfg.project, cfg.service_account_id),
            metadata=boot_contract.node_metadata(
                startup_script=startup_script, ssh_keys=ssh.ssh_keys_metadata,
                hf_token_secret=secrets.hf_token_secret_name, api_key_secret=secrets.api_key_secret_name,
                cache_device=cfg.cache.device_name, cache_mount=cfg.cache.mount_point, image=cfg.vllm.image,
            ),
            data_disks=[cache.source_disk],
            tags=[node_tag],
            labels=labels,
        )
        node = TpuNode(
            "tpu",
            TpuNodeArgs(
                body=body,
                parent=f"projects/{cfg.project}/locations/{cfg.tpu.zone}",
                queued_resource_id=cfg.node_id,
                queue_seconds=cfg.tpu.queue_seconds,
            ),
            pulumi.ResourceOptions(depends_on=[identity.account, secrets, cache, firewall, *services.services]),
        )
        server = VllmServer(
            "vllm",
            VllmServerArgs(settings=cfg, host=node.external_ip, node_uid=node.node_uid,
                           ssh_user=cfg.access.ssh_user, ssh_private_key=ssh.private_key),
        )

        kv = cfg.kv_budget()
        pricing = cfg.tpu.provisioning_model
        port = cfg.vllm.port
        key_file = f"~/.ssh/{prefix}"
        ssh_target = pulumi.Output.concat(cfg.access.ssh_user, "@", node.external_ip)
        outputs: dict[str, Any] = {}
        outputs["gcloudEquivalent"] = gcloud_equivalent(body, cfg.node_id)
        outputs["nodeName"] = node.node_name
        outputs["queuedResourceState"] = node.state
        # The plain name, so tools.status finds the request in any state (nodeName is empty unless ACTIVE).
        outputs["queuedResourceName"] = f"projects/{cfg.project}/locations/{cfg.tpu.zone}/queuedResources/{cfg.node_id}"
        outputs["runEndsAt"] = node.termination_time
        outputs["internalEndpoint"] = pulumi.Output.concat("http://", node.internal_ip, f":{port}/v1")
        if cfg.access.serving_source_ranges:
            outputs["externalEndpoint"] = pulumi.Output.concat("http://", node.external_ip, f":{port}/v1")
        outputs["sshPrivateKeySetup"] = (
            f"pulumi stack output sshPrivateKey --show-secrets > {key_file} && chmod 600 {key_file}")
        outputs["sshPrivateKey"] = ssh.private_key
        outputs["sshCommand"] = pulumi.Output.concat(f"ssh -i {key_file} ", ssh_target)
        outputs["sshTunnelCommand"] = pulumi.Output.concat(
            f"ssh -i {key_file} -N -L {port}:127.0.0.1:{port} ", ssh_target)
        outputs["localEndpoint"] = f"http://127.0.0.1:{port}/v1"
        outputs["apiKey"] = secrets.api_key
        outputs["hfTokenSource"] = secrets.hf_token_source
        outputs["vllmServeCommand"] = server.serve_command
        outputs["dockerRunCommand"] = container.render_docker_command(cfg)
        outputs["costPerHourUsd"] = budget.cost_per_hour_usd(pricing)
        if pricing == "flex-start":
            outputs["maxSpendPerRunUsd"] = round(budget.max_spend_usd(pricing, cfg.tpu.run_seconds), 2)
            # The TPU's part stops with the run; this adds the cache disk's share of the run's hours.
            outputs["maxSpendPerRunUsdWithDisk"] = round(budget.max_spend_with_disk_usd(
                pricing, cfg.tpu.run_seconds, cfg.cache.disk_type, cfg.cache.size_gb), 2)
        # The disk bills by the GB-month from creation to deletion, run or no run.
        outputs["cacheDiskUsdPerMonth"] = round(budget.disk_usd_per_month(cfg.cache.disk_type, cfg.cache.size_gb), 2)
        outputs["cacheDiskBilling"] = cache.disk.name.apply(lambda disk_name: budget.cache_disk_billing(
            cfg.cache.disk_type, cfg.cache.size_gb, cfg.cache.keep_on_destroy, disk_name=disk_name,
            zone=cfg.tpu.zone, project=cfg.project))
        if kv is not None:
            outputs["kvBytesPerToken"] = kv.kv_bytes_per_token
            outputs["kvTokens"] = kv.kv_tokens
            outputs["kvPoolGib"] = round(budget.gib(kv.kv_pool_bytes), 2)
            outputs["hbmCapGib"] = round(budget.gib(kv.hbm_cap_bytes), 2)
            outputs["concurrencyGuidance"] = (
                f"keep clients x context under {kv.load_limit_tokens:,} tokens (78% of {kv.kv_tokens:,}); "
                f"e.g. 16 agents at {kv.load_limit_tokens // 16:,} tokens each")
        self.outputs = outputs
