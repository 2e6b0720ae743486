"""tpu-vllm's guardrails by name: the table the pack's entry (policy/__main__.py) wraps.

Each rule lives in the module of its subject: tpu_billing, firewall_exposure, secret_leaks, memory_cap,
identity_grants (the GKE rules in gke_rules). They are plain functions over resource properties, importable
without pulumi_policy, so they are tested directly on the dev stack's resources. Each returns a list of
violation messages, each saying how to fix it. They judge what GCP will do with a value, not how it is
spelled: ranges by the addresses they cover, protocols by number or name, ports by the ranges that contain
them, commands as a shell reads them.
"""

from __future__ import annotations

try:
    from .firewall_exposure import firewall_not_open_to_the_world
    from .identity_grants import other_providers_iam_is_reviewed, stack_identities_hold_only_their_grants
    from .memory_cap import gpu_memory_utilization_capped
    from .secret_leaks import metadata_has_no_secrets, secrets_are_labelled
    from .tpu_billing import tpu_billing_stops
except ImportError:  # run by the pack's __main__, which puts this directory on sys.path
    from firewall_exposure import firewall_not_open_to_the_world
    from identity_grants import other_providers_iam_is_reviewed, stack_identities_hold_only_their_grants
    from memory_cap import gpu_memory_utilization_capped
    from secret_leaks import metadata_has_no_secrets, secrets_are_labelled
    from tpu_billing import tpu_billing_stops

RESOURCE_RULES = {
    "tpu-billing-stops": (tpu_billing_stops,
                          "A flex-start TPU runs at most 7 days; no TPU bills without an end unless allowed."),
    "metadata-has-no-secrets": (metadata_has_no_secrets,
                                "No instance metadata value looks like a token, key or random secret."),
    "secrets-are-labelled": (secrets_are_labelled, "Secret Manager secrets carry labels."),
    "gpu-memory-utilization-capped": (gpu_memory_utilization_capped,
                                      "The vLLM serve command keeps --gpu-memory-utilization at 0.92 or below."),
}
STACK_RULES = {
    "firewall-not-open-to-the-world": (
        firewall_not_open_to_the_world,
        "SSH and the serving ports are not open to the internet (by the addresses the rules cover) unless allowed."),
    "stack-identities-hold-only-their-grants": (
        stack_identities_hold_only_their_grants,
        "The stack's service accounts hold exactly the grants the stack makes (an allow-list), on any resource; "
        "no one else may act as them."),
}
# Reported, not enforced: what the pack cannot read as a grant is named for a reviewer.
ADVISORY_STACK_RULES = {
    "other-providers-iam-is-reviewed": (
        other_providers_iam_is_reviewed,
        "IAM changes outside pulumi-gcp (google-native IAM resources, gcloud IAM commands) are named for review."),
}
