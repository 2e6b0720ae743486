"""The catalog's Google facts the second reader checked against Google's pages (as the search tool stores them):
which quota each provisioning model draws on, the zones each type exists in, and what a zone outside them is told."""

from __future__ import annotations

from pathlib import Path

from components import catalog
from components.catalog.shapes import V5E, V6E
from tools.fit import docs

# Google's flex-start page, Before you begin (cloud.google.com/tpu/docs/request-using-flex-start, as stored).
FLEX_START_QUOTA_SENTENCE = "You should also ensure you have sufficient preemptible quota to use Flex-start."


def test_flex_start_draws_on_the_preemptible_quota_as_spot_does():
    assert "preemptible quota" in FLEX_START_QUOTA_SENTENCE
    assert V5E.quota_id_for("flex-start") == V5E.flex_start_quota_id == \
        "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI"
    assert V6E.quota_id_for("flex-start") == V6E.quota_id_for("spot") == "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"
    # On-demand keeps its own quota; what the catalog has not read gets no id rather than a guess.
    assert V5E.quota_id_for("on-demand") == "TPUV5sLitepodPerProjectPerZoneForTPUAPI"
    assert V6E.quota_id_for("1-year") is None


def test_docs_models_does_not_send_flex_start_users_to_the_on_demand_quota():
    header, _, *rows = docs.shapes_rows()
    assert "on-demand/flex" not in header and "flex-start: preemptible" in header
    v5e_row = next(row for row in rows if "`v5litepod-1`" in row)
    assert v5e_row.endswith("`TPUV5sLitepodPerProjectPerZoneForTPUAPI`; "
                            "`TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI` |")


def test_v6e_exists_in_every_zone_googles_page_lists():
    # The stored page's v6e rows for the USA, single-tenant ones included, and the flex-start page's Asia zone.
    listed = {"us-central1-b", "us-east1-d", "us-east5-a", "us-east5-b", "us-east5-c", "us-east4-a", "us-east4-b",
              "us-west1-c", "asia-northeast1-b"}
    assert listed <= V6E.zones
    assert "us-west4-a" not in V6E.zones


def test_v5e_takes_hyperdisk_ml_too_and_the_stack_keeps_pd_balanced():
    assert "hyperdisk-ml" in V5E.data_disk_types
    assert catalog.shape("v5litepod-8").cache_disk_type == "pd-balanced"


def test_a_zone_outside_the_list_is_told_the_list_is_googles_as_read_and_how_to_add_one():
    message = V5E.zone_not_listed("asia-southeast1-b")
    assert message.startswith("asia-southeast1-b is not in the zones Google's pages listed for TPU v5e as of 2026-12")
    assert "us-west4-a" in message and "components/catalog/shapes.py" in message and "with the source" in message
    assert "there is no TPU" not in message


def test_a_v5e_node_draws_the_serving_quota_in_googles_serving_zone_and_the_training_one_in_the_default():
    # Google: "TPU v5e uses separate quotas for training and serving"; flex-start "TPU v5e for training: us-west4-a;
    # TPU v5e for serving: us-central1-a"; the quota page's serving names. The log drew the training one in us-west4-a.
    assert V5E.quota_id_for("flex-start", "us-west4-a") == "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI"
    assert V5E.quota_id_for("flex-start", "us-central1-a") == "tpu-v5s-litepod-serving-preemptible"
    assert V5E.quota_id_for("on-demand", "us-central1-a") == "tpu-v5s-litepod-serving"
    assert V6E.quota_id_for("flex-start", "us-east5-a") == "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"
    note = docs.shapes_rows()[-1]
    assert "`tpu-v5s-litepod-serving-preemptible` preemptible" in note and "`us-central1-a` for v5e serving" in note
    assert "node in `us-west4-a` (the stack's default) drew the preemptible training quota" in note
    # The quota page ties serving quota to inference, not to a zone: the note says no source settles the rest.
    assert "for on-demand or spot elsewhere no source says which" in note
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    prerequisites = readme[readme.index("- TPU quota for v5e"):readme.index("- IAM roles")]
    assert "`us-west4-a`" in prerequisites and "TPUV5sPreemptibleLitepodPerProjectPerZoneForTPUAPI" in prerequisites
    assert "`us-central1-a`" in prerequisites and "tpu-v5s-litepod-serving-preemptible" in prerequisites
