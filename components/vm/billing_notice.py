"""What every failure after the node went ACTIVE must say: the TPU bills, until when, and the ways out."""

from __future__ import annotations


def still_billing(run_ends_at: str, usd_per_hour: float | None) -> str:
    """`run_ends_at`: the queued resource's terminationTime (empty for spot and on-demand: no end)."""
    until = (f"until its run ends at {run_ends_at}, when GCP deletes it" if run_ends_at
             else "with no end of run: until it is deleted")
    rate = f"${usd_per_hour:.2f}/hour" if usd_per_hour is not None else "price not found"
    return (f"The TPU node is running and billing ({rate}) {until}. Either fix the cause and "
            "run `pulumi up` again (it retries this step on the same node), or stop the billing now with "
            "`pulumi destroy`.")
