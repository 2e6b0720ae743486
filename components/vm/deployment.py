"""The single-VM wing: cache disk, firewall, SSH key, the node (a queued resource or a Compute Engine instance:
components/vm/node_path.py) and the serving step, and the outputs a newcomer needs.

Its children were declared at the stack's root before the wing was a component; each keeps that URN with
`Alias(parent=ROOT_STACK_RESOURCE)` (sdk/python/lib/pulumi/resource.py in pulumi/pulumi v3.272.0, class
Alias: "To specify no original parent, use `Alias(parent=pulumi.ROOT_STACK_RESOURCE)`"; create_alias_spec in
sdk/python/lib/pulumi/runtime/resource.py sends it as noParent), and what each child holds inherits it
(pkg/resource/deploy/step_generator.go, generateAliases), so a live stack's disk, firewall and TPU are
updated, not replaced. tests/test_urns.py proves it against the URNs recorded in tests/golden/urns/.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.basis import chip_memory, spending
from components.basis.chip_memory import KvBudget
from components.core.identity import account_email
from components.core.image_digest import pinned_image
from components.core.shared_resources import Core
from components.economics import cost_lines
from components.monitoring.promql import Scope, layout_note
from components.monitoring.resources import OperatorMonitoring, OperatorMonitoringArgs
from components.serving.serve_command import render_serve_args
from components.serving.spec import serving_spec
from components.settings import Settings
from components.settings.cache import CacheSettings
from components.settings.monitoring import MonitoringSettings
from components.settings.tpu import TpuSettings
from components.vm import boot_contract, container, ops_agent
from components.vm.billing_notice import still_billing
from components.vm.cache_disk import CacheDisk, CacheDiskArgs
from components.vm.container import VmServing
from components.vm.host_key import NodeHostKey, NodeHostKeyArgs, known_hosts_line, pinned_ssh_options
from components.vm.network import NodeFirewall, NodeFirewallArgs
from components.vm.node_path import NodePath, NodeRequest, declare_node
from components.vm.serving_step import (
    ServingStep,
    ServingStepArgs,
    remote_command_text,
    serve_stdin,
    ssh_blocked_cause,
)
from components.vm.ssh_access import SshAccess, SshAccessArgs

TUNNEL_KEEPALIVE = "-o ExitOnForwardFailure=yes -o ServerAliveInterval=30 -o ServerAliveCountMax=3"


@dataclass
class VmWingArgs:
    settings: Settings
    """The validated stack settings (platform vm)."""
    core: Core
    """The shared core: APIs, the VM's identity, the secrets, the labels."""


class VmWing(pulumi.ComponentResource):
    """Everything the vm platform adds to the shared core; `outputs` is what the stack exports."""

    outputs: dict[str, Any]

    def __init__(self, name: str, args: VmWingArgs, opts: pulumi.ResourceOptions | None = None):
        # The type token keeps the name it had before the wing was called a wing: every child's URN is built
        # from it, so renaming it would replace the stack (or need an alias on every child).
        super().__init__("tpu-vllm:vm:Deployment", name, None, opts)
        cfg, core = args.settings, args.core
        # The server, derived once; everything below renders it (components/serving/spec.py).
        spec = serving_spec(cfg)
        serving = VmServing.of(spec, vllm=cfg.vllm, cache=cfg.cache)
        labels, services, identity, secrets = core.labels, core.services, core.identity, core.secrets
        prefix = cfg.resource_prefix
        node_tag = cfg.network_tag
        # Children keep the URNs they had at the stack's root (see the module's docstring).
        child = pulumi.ResourceOptions(parent=self, aliases=[pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)])
        after_services = pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=core.apis))

        cache = CacheDisk(
            "cache",
            CacheDiskArgs(project=cfg.project, zone=cfg.tpu.zone, name=cfg.cache_disk_name,
                          size_gb=cfg.cache.size_gb, disk_type=cfg.cache_disk_type,
                          keep_on_destroy=cfg.cache.keep_on_destroy, labels=labels,
                          owner_labels={key: labels[key] for key in ("app", "stack")}),
            after_services,
        )
        firewall = NodeFirewall(
            "firewall",
            NodeFirewallArgs(project=cfg.project, network=cfg.tpu.network, name_prefix=prefix,
                             target_tag=node_tag, serving_port=spec.listen_port,
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
            child,
        )

        vm_account_email = account_email(cfg.project, cfg.vm_service_account_id)
        host_key = NodeHostKey(
            "ssh-host-key",
            NodeHostKeyArgs(project=cfg.project, prefix=prefix, reader_email=vm_account_email, labels=labels),
            pulumi.ResourceOptions(parent=self, depends_on=[*core.apis, identity.account]),
        )

        # One build per stack: the tag's digest at the first `pulumi up`, kept in state, is what the boot pulls and
        # what the serving step runs, at every boot and re-up until vllm.image changes (as on gke).
        image = pinned_image("vllm-image", spec.vllm_image, pulumi.ResourceOptions(parent=self))

        def with_image(reference: str) -> VmServing:
            return replace(serving, spec=replace(spec, vllm_image=reference))

        # The one value that picks the node's path (components/vm/node_path.py); the rest of the wing is shared.
        path = NodePath(api=cfg.tpu.node_api, machine_type=cfg.tpu.machine_type, boot_image=cfg.tpu.boot_image,
                        # The boot disk takes the type the machine accepts, the cache disk's (Hyperdisk on v6e).
                        boot_disk_type=cfg.cache_disk_type)
        startup_script = path.startup_script()
        declared = declare_node(path, NodeRequest(
            project=cfg.project,
            zone=cfg.tpu.zone,
            node_id=cfg.node_id,
            accelerator_type=cfg.tpu.shape.accelerator_type,
            runtime_version=cfg.tpu.runtime,
            provisioning_model=cfg.tpu.provisioning_model,
            run_seconds=cfg.tpu.run_seconds,
            queue_seconds=cfg.tpu.queue_seconds,
            network=cfg.tpu.network,
            subnetwork=cfg.tpu.subnetwork,
            service_account_email=vm_account_email,
            metadata=boot_contract.node_metadata(
                startup_script=startup_script, ssh_keys=ssh.ssh_keys_metadata,
                hf_token_secret=secrets.hf_token_secret_name, api_key_secret=secrets.api_key_secret_name,
                ssh_host_key_secret=host_key.secret_name,
                cache_device=cfg.cache.device_name, cache_size_gb=str(cfg.cache.size_gb),
                cache_mount=cfg.cache.mount_point, image=image,
                ops_agent_config=(ops_agent.config(resource_prefix=prefix, upstream_port=spec.upstream_port)
                                  if cfg.monitoring.enabled else ""),
            ),
            cache_disk=cache.source_disk,
            cache_device_name=cfg.cache.device_name,
            tags=[node_tag],
            labels=labels,
            depends_on=[identity.account, secrets, host_key, cache, firewall, *services.services],
        ), child)
        node = declared.node
        usd_per_hour = cfg.tpu_usd_per_hour()
        billing_note = node.termination_time.apply(lambda end: still_billing(end, usd_per_hour))
        stdin = pulumi.Output.all(image, billing_note).apply(lambda both: serve_stdin(with_image(both[0]), both[1]))
        server = ServingStep(
            "vllm",
            ServingStepArgs(remote_command=image.apply(lambda ref: remote_command_text(with_image(ref))), stdin=stdin,
                           stdin_without_note=image.apply(lambda ref: serve_stdin(with_image(ref))),
                           serve_command=render_serve_args(spec.serve_args), host=node.external_ip,
                           node_uid=node.node_uid, ssh_user=cfg.access.ssh_user, ssh_private_key=ssh.private_key,
                           ssh_host_key=host_key.public_key,
                           ssh_blocked_cause=ssh_blocked_cause(cfg.access), billing_note=billing_note),
            child,
        )

        kv = cfg.kv_budget()
        pricing = cfg.tpu.provisioning_model
        if cfg.monitoring.enabled:
            flex = cfg.tpu.provisioning_model == "flex-start"
            self._monitoring(cfg.project, cfg.monitoring,
                             monitoring_scope(cfg.stack, prefix, cfg.tpu, cfg.cache, cfg.kv_budget(),
                                              usd_per_hour=usd_per_hour, disk_type=cfg.cache_disk_type,
                                              engines=cfg.data_parallel_size,
                                              price_not_found=None if usd_per_hour is not None else
                                              cfg.price_not_found()), core,
                             node.termination_time if flex else None)
        port = spec.listen_port
        key_file = f"~/.ssh/{prefix}"
        known_hosts_file = f"{key_file}.known_hosts"
        # Every ssh the outputs print pins the stack's host key by this alias, whatever the node's address.
        pinned = " ".join(pinned_ssh_options(known_hosts_file, prefix))
        ssh_target = pulumi.Output.concat(cfg.access.ssh_user, "@", node.external_ip)
        outputs: dict[str, Any] = {}
        outputs.update(declared.outputs)
        outputs["runEndsAt"] = node.termination_time
        outputs["internalEndpoint"] = pulumi.Output.concat("http://", node.internal_ip, f":{port}/v1")
        if cfg.access.serving_source_ranges:
            outputs["externalEndpoint"] = pulumi.Output.concat("http://", node.external_ip, f":{port}/v1")
        outputs["sshPrivateKeySetup"] = (
            f"pulumi stack output sshPrivateKey --show-secrets > {key_file} && chmod 600 {key_file} && "
            f"pulumi stack output sshKnownHosts > {known_hosts_file}")
        outputs["sshPrivateKey"] = ssh.private_key
        outputs["sshHostKey"] = host_key.public_key
        outputs["sshKnownHosts"] = host_key.public_key.apply(lambda public: known_hosts_line(prefix, public))
        outputs["sshCommand"] = pulumi.Output.concat(f"ssh -i {key_file} {pinned} ", ssh_target)
        # ExitOnForwardFailure: a local port already taken ends the tunnel instead of leaving it useless;
        # the keep-alives end it within ~90 s of the node going away (ssh_config(5)).
        outputs["sshTunnelCommand"] = pulumi.Output.concat(
            f"ssh -i {key_file} {pinned} {TUNNEL_KEEPALIVE} -N -L 127.0.0.1:{port}:127.0.0.1:{port} ", ssh_target)
        outputs["localEndpoint"] = f"http://127.0.0.1:{port}/v1"
        outputs["apiKey"] = secrets.api_key
        outputs["hfTokenSource"] = secrets.hf_token_source
        outputs["vllmServeCommand"] = server.serve_command
        outputs["dockerRunCommand"] = image.apply(lambda ref: container.render_docker_command(with_image(ref)))
        outputs["vllmImage"] = image
        chips, disk_type = cfg.tpu.shape.chips, cfg.cache_disk_type
        rate = cfg.usd_per_chip_hour()
        # No price read for the chip (TPU7x): the cost outputs are None, never the log's v5e price in its place.
        outputs["costPerHourUsd"] = None if rate is None else spending.cost_per_hour_usd(pricing, chips, rate)
        if rate is None:
            outputs["priceNotFound"] = cfg.price_not_found()
            if pricing == "flex-start":
                outputs["maxSpendPerRunUsd"] = outputs["maxSpendPerRunUsdWithDisk"] = None
        elif pricing == "flex-start":
            outputs["maxSpendPerRunUsd"] = round(spending.max_spend_usd(pricing, cfg.tpu.run_seconds, chips,
                                                                        rate), 2)
            # The TPU's part stops with the run; this adds the cache disk's share of the run's hours.
            with_disk = spending.max_spend_with_disk_usd(pricing, cfg.tpu.run_seconds, disk_type, cfg.cache.size_gb,
                                                         chips, rate)
            outputs["maxSpendPerRunUsdWithDisk"] = None if with_disk is None else round(with_disk, 2)
        # The disk bills by the GB-month from creation to deletion, run or no run (None: no price read for its type).
        disk_month = spending.disk_usd_per_month(disk_type, cfg.cache.size_gb)
        outputs["cacheDiskUsdPerMonth"] = None if disk_month is None else round(disk_month, 2)
        outputs["cacheDiskBilling"] = cache.disk.name.apply(lambda disk_name: cost_lines.cache_disk_billing(
            disk_type, cfg.cache.size_gb, cfg.cache.keep_on_destroy, disk_name=disk_name,
            zone=cfg.tpu.zone, project=cfg.project))
        if kv is not None:
            outputs["kvBytesPerToken"] = kv.kv_bytes_per_token
            outputs["kvTokens"] = kv.kv_tokens
            outputs["kvPoolGib"] = round(chip_memory.gib(kv.kv_pool_bytes), 2)
            outputs["hbmCapGib"] = round(chip_memory.gib(kv.hbm_cap_bytes), 2)
            outputs["concurrencyGuidance"] = (
                f"keep clients x context under {kv.load_limit_tokens:,} tokens (78% of {kv.kv_tokens:,}); "
                f"e.g. 16 agents at {kv.load_limit_tokens // 16:,} tokens each{kv.replicas_clause}")
        self.outputs = outputs
        self.register_outputs(outputs)

    def _monitoring(self, project: str, monitoring: MonitoringSettings, scope: Scope, core: Core,
                    run_end: pulumi.Output[str] | None) -> None:
        """The Ops Agent's two roles for the VM's identity (nothing else), the dashboard and the alerts."""
        opts = pulumi.ResourceOptions(parent=self, depends_on=core.apis)
        for role in ops_agent.AGENT_ROLES:
            gcp.projects.IAMMember(
                f"vm-{role.split('/')[-1]}", project=project, role=role,
                member=pulumi.Output.concat("serviceAccount:", core.identity.email), opts=opts)
        OperatorMonitoring("vm-monitoring", OperatorMonitoringArgs(
            project=project, settings=monitoring, scope=scope, labels=core.labels,
            run_end=run_end, depends_on=core.apis), pulumi.ResourceOptions(parent=self))


def monitoring_scope(stack: str, resource_prefix: str, tpu: TpuSettings, cache: CacheSettings,
                     kv: KvBudget | None, *, usd_per_hour: float | None = None, disk_type: str | None = None,
                     engines: int = 1, price_not_found: str | None = None) -> Scope:
    """What the VM's dashboard and alerts watch, and the notes they carry. usd_per_hour: the host's chips
    (Settings.tpu_usd_per_hour; unset, the log's v5e-1); disk_type: the cache disk's (Settings.cache_disk_type);
    price_not_found: Settings.price_not_found where the chip has no price (usd_per_hour stays None)."""
    pricing = tpu.provisioning_model
    flex = pricing == "flex-start"
    if price_not_found is None:
        usd_per_hour = spending.cost_per_hour_usd(pricing) if usd_per_hour is None else usd_per_hour
    disk_month = spending.disk_usd_per_month(disk_type or tpu.shape.cache_disk_type, cache.size_gb)
    price = f"at ${usd_per_hour:.2f}/hour" if price_not_found is None else price_not_found
    notes = [f"{tpu.accelerator_type} in {tpu.zone}, {pricing} {price}"]
    if flex:
        disk = (f"bills ${disk_month:.2f}/month run or no run" if disk_month is not None else
                "bills by the GB-month run or no run (no price read for its type)")
        most = (f" and costs at most ${usd_per_hour * tpu.run_seconds / 3600:.2f} of TPU time"
                if price_not_found is None else "")
        notes.append(f"Each run lasts {tpu.max_run_duration}{most}; the cache disk {disk}")
    if engines > 1:
        notes.append(layout_note(tpu.shape.devices, engines))
    return Scope(title=f"tpu-vllm {stack} (vm)",
                 labels={"job": ops_agent.job_name(resource_prefix)}, kv=kv, replicas=False,
                 usd_per_hour=usd_per_hour, run_seconds=tpu.run_seconds if flex else None,
                 notes=tuple(notes), engines=engines)
