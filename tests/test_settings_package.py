"""The settings package's shape: one Finding for every check, rendered in one place; shared field types; the
docs table generated from the fields; no import from the core into a wing."""

import ast
import pathlib

import pytest

from components import settings as s
from components.settings import docs

SSH = {"access": {"sshSourceRanges": ["198.51.100.7/32"]}}
ROOT = pathlib.Path(__file__).resolve().parents[1]


def problems(**sections) -> list[str]:
    with pytest.raises(s.SettingsError) as caught:
        s.load({**SSH, **sections}, "my-proj", "dev")
    return caught.value.problems


def test_an_error_and_a_warning_on_one_key_spell_it_alike():
    [error] = problems(tpu={"zone": "europe-west4-a"})
    [warning] = [w for w in s.load({**SSH, "tpu": {"zone": "us-east5-a"}}, "my-proj", "dev").warnings
                 if "tpu.zone" in w]
    assert error.startswith('tpu-vllm:tpu.zone = "europe-west4-a": ')
    assert warning.startswith('tpu-vllm:tpu.zone = "us-east5-a": ')


def test_field_warnings_and_rule_warnings_are_findings_with_key_value_fix_and_severity():
    loaded = s.load({**SSH, "vllm": {"maxNumBatchedTokens": 3000}, "tpu": {"provisioningModel": "spot"}},
                    "my-proj", "dev")
    by_key = {finding.key: finding for finding in loaded.findings}
    assert by_key["vllm.maxNumBatchedTokens"].value == 3000 and by_key["vllm.maxNumBatchedTokens"].fix == "use 4096"
    assert by_key["tpu.provisioningModel"].value == "spot" and "flex-start" in by_key["tpu.provisioningModel"].fix
    assert {finding.severity for finding in loaded.findings} == {"warning"}
    assert loaded.warnings == [finding.render() for finding in loaded.findings]


def test_a_rule_that_reads_a_key_which_failed_on_its_own_says_nothing_more():
    # healthTimeout 10m fails by itself; the run-length rule would judge the 30m default in its place.
    [problem] = problems(tpu={"maxRunDuration": "30m"}, vllm={"healthTimeout": "10m"})
    assert problem.startswith('tpu-vllm:vllm.healthTimeout = "10m": ')
    # The same run length against a valid health wait is still judged.
    [problem] = problems(tpu={"maxRunDuration": "30m"})
    assert problem.startswith('tpu-vllm:tpu.maxRunDuration = "30m": ')


def test_duplicates_are_removed_by_comparing_findings_not_text():
    same = s.Finding("front.listenPort", [1, 2], "why", "fix")
    assert same == s.Finding("front.listenPort", [1, 2], "why", "fix")
    assert len({same, s.Finding("front.listenPort", [1, 2], "why", "fix")}) == 1
    assert same != s.Finding("front.listenPort", [1, 2], "why", "fix", "warning")
    assert same != s.Finding("vllm.serverPort", [1, 2], "why", "fix")


def test_a_secret_value_is_never_rendered():
    finding = s.Finding("hfToken", "hf_CANARY", "why", "fix", secret=True)
    assert "CANARY" not in finding.render() and "[secret]" in finding.render()


@pytest.mark.parametrize("section, key", [("tpu", "maxRunDuration"), ("tpu", "queueTimeout"),
                                          ("vllm", "healthTimeout"), ("gke", "terminationGracePeriod")])
def test_every_duration_field_is_the_one_duration_type(section, key):
    raw = {section: {key: 5}} if section != "gke" else {"platform": "gke", "gke": {key: 5}}
    with pytest.raises(s.SettingsError) as caught:
        s.load({**SSH, **raw}, "my-proj", "dev")
    [problem] = [p for p in caught.value.problems if f"{section}.{key}" in p]
    assert problem.startswith(f"tpu-vllm:{section}.{key} = 5: ") and "write durations like 4h" in problem
    with pytest.raises(s.SettingsError) as caught:
        s.load({**SSH, **({section: {key: "soon"}} if section != "gke" else {"platform": "gke", "gke": {key: "soon"}})},
               "my-proj", "dev")
    assert any("cannot read 'soon' as a duration" in p for p in caught.value.problems)


@pytest.mark.parametrize("section", ["vllm", "front"])
def test_both_image_fields_are_the_one_image_reference_type(section):
    [problem] = problems(**{section: {"image": "--privileged"}})
    assert problem.startswith(f'tpu-vllm:{section}.image = "--privileged": not an image reference docker can pull')


def test_a_media_host_is_judged_item_by_item():
    [problem] = problems(vllm={"allowedMediaDomains": ["images.example.com", "metadata.google.internal"]})
    assert problem.startswith('tpu-vllm:vllm.allowedMediaDomains[1] = "metadata.google.internal": ')


def test_a_bad_zone_in_the_gke_node_locations_names_the_item():
    with pytest.raises(s.SettingsError) as caught:
        s.load({"platform": "gke", "gke": {"nodeLocations": ["us-west4-a", "uswest4"]}}, "my-proj", "gke")
    assert any(p.startswith('tpu-vllm:gke.nodeLocations[1] = "uswest4": ') and "us-west4-a" in p
               for p in caught.value.problems)


def test_the_settings_table_in_docs_is_the_generated_one():
    assert docs.main(["--check"]) == 0, "run python -m components.settings.docs"


def test_every_setting_has_a_description_for_the_table():
    keys = [line.split("`")[1] for line in docs.rows()[2:]]
    assert "tpu.zone" in keys and "gke.installMetricsAdapter" in keys and "hfToken" in keys
    assert len(keys) == len(set(keys))
    assert all(field.description for section in s.TOP_LEVEL_KEYS.values() if section
               for field in section.model_fields.values())


def test_the_table_check_fails_on_a_hand_edit(tmp_path, monkeypatch):
    edited = tmp_path / "settings.md"
    edited.write_text(docs.DOC.read_text().replace("| `tpu.zone` | `us-west4-a` |", "| `tpu.zone` | `us-west1-c` |"))
    monkeypatch.setattr(docs, "DOC", edited)
    assert docs.main(["--check"]) == 1
    assert docs.main([]) == 0 and docs.main(["--check"]) == 0


def _imports(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize("path", sorted((ROOT / "components" / "settings").rglob("*.py")), ids=lambda p: p.name)
def test_the_settings_import_no_wing(path):
    wings = [name for name in _imports(path) if name.startswith(("components.gke", "components.vm", "tools"))]
    assert not wings, f"{path.relative_to(ROOT)} imports {wings}: the core may not import a wing or a tool"
