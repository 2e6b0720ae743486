"""components/gke/manifests.py names each built-in kind's class as a path, resolved only when declared."""

from __future__ import annotations

from pathlib import Path

import pulumi_kubernetes

from components.gke import manifests

PACKAGE = Path(pulumi_kubernetes.__file__).parent


def test_every_built_in_kind_names_the_class_with_that_kinds_type_token():
    # Read from the package's files, not imported: importing them is what the lazy table saves every importer.
    # pulumi/pulumi-kubernetes v4.34.2, sdk/python/pulumi_kubernetes/<group>/<version>/<Kind>.py declares
    # @pulumi.type_token("kubernetes:<group>/<version>:<Kind>"), the core group's apiVersion "v1" as core/v1.
    wrong = []
    for (api_version, kind), path in manifests.BUILT_IN_KINDS.items():
        token = f"kubernetes:{'core/v1' if api_version == 'v1' else api_version}:{kind}"
        source = PACKAGE.joinpath(*path.split(".")).with_suffix(".py")
        if not source.is_file() or f'@pulumi.type_token("{token}")' not in source.read_text():
            wrong.append((api_version, kind, path))
    assert wrong == []


def test_an_unknown_kind_has_no_built_in_class():
    assert manifests.built_in_class("cloud.google.com/v1", "ComputeClass") is None
