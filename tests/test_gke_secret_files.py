"""On gke the HF token and the API key are files the Secret Manager add-on writes: 0400, root's, and mounted
only into the containers that read them (checked on the rendered objects of the example stack)."""

from __future__ import annotations

import yaml

from components.gke import workload

SECRET_PROVIDER_CLASS = "kubernetes:secrets-store.csi.x-k8s.io/v1:SecretProviderClass"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
SERVING = "serving-deployment"


def pod_spec(program) -> dict:
    return program.named(SERVING)["inputs"]["spec"]["template"]["spec"]


def test_every_secret_file_is_written_0400(gke_program):
    classes = gke_program.of_type(SECRET_PROVIDER_CLASS)
    assert len(classes) == 2
    for spc in classes:
        text = spc["inputs"]["spec"]["parameters"]["secrets"]
        entries = yaml.safe_load(text)
        assert [entry["mode"] for entry in entries] == [0o400]
        # Decimal on the wire: the provider's YAML reader takes `0400` as octal, a YAML 1.2 reader as 400.
        assert "mode: 256\n" in text


def test_only_the_containers_that_read_a_secret_mount_it_read_only(gke_program):
    spec = pod_spec(gke_program)
    secret_volumes = {v["name"] for v in spec["volumes"]
                      if v.get("csi", {}).get("driver") == workload.SECRETS_CSI_DRIVER}
    assert secret_volumes == {"hf-token", "api-key"}
    mounted = {c["name"]: {m["name"] for m in c.get("volumeMounts", []) if m["name"] in secret_volumes}
               for c in spec["containers"] + spec.get("initContainers", [])}
    assert mounted == {"vllm": {"hf-token", "api-key"}, "front": {"api-key"}, "metrics": set()}
    for container in spec["containers"]:
        for mount in container.get("volumeMounts", []):
            if mount["name"] in secret_volumes:
                assert mount.get("readOnly") is True, (container["name"], mount)
    assert all(v["csi"]["readOnly"] is True for v in spec["volumes"] if v["name"] in secret_volumes)


def test_the_readers_run_as_root_so_a_0400_root_file_stays_readable_to_them_alone(gke_program):
    # The entry commands read the files as root (vLLM's image and nginx's master run as root); nothing in
    # the pod moves them to another user, which a 0400 root-owned file would lock out.
    spec = pod_spec(gke_program)
    pod_context = spec.get("securityContext") or {}
    assert pod_context.get("runAsUser", 0) == 0 and not pod_context.get("runAsNonRoot")
    for container in spec["containers"]:
        if container["name"] in ("vllm", "front"):
            context = container.get("securityContext") or {}
            assert context.get("runAsUser", 0) == 0 and not context.get("runAsNonRoot"), container["name"]
