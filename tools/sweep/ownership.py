"""Which stack the sweep may touch: only one it made, never the base by any spelling, never another of the project.

A sweep destroys and removes its stack at the end, so the name it is given must not reach a stack the user
keeps. Pulumi resolves a stack reference by splitting it on "/" (pulumi/pulumi at 1b59498, after v3.259.0; the
pinned 3.272.0's Go source is in no stored snapshot):
- the DIY backend (pkg/backend/diy/store.go projectReferenceStore.ParseReference): `NAME`, `ORG/NAME` or
  `ORG/PROJECT/NAME`, ORG always "organization" ("organization name must be 'organization'"), PROJECT the current
  project when left out;
- Pulumi Cloud (pkg/backend/httpstate/backend.go parseStackName, ParseStackReference): the same three forms, more
  parts "could not parse stack name", ORG the default org or the current user when left out, an owner matching
  `^[a-zA-Z0-9][a-zA-Z0-9-_]{1,38}[a-zA-Z0-9]$` (stackOwnerRegexp);
- the name itself in both (sdk/go/common/tokens/stack_name.go ParseStackName): 1 to 100 characters of
  `[A-Za-z0-9_.-]`.
So `organization/tpu-vllm/dev` and `ME/dev` are the stack `dev`. The sweep cannot know the Cloud's default org
offline, so any owner counts as this project's: the stack part alone decides, compared case-blind (a DIY backend
on a case-insensitive file system keeps `Dev` and `dev` in one file). The Automation API hands the name to
`pulumi stack init NAME` as an argument (pulumi/automation/_local_workspace.py create_stack, 3.272.0), where a
leading "-" is read as a flag, so the sweep takes only names that start with a letter or a digit.

The mark: a stack tag the sweep sets right after `stack init`, before anything else (`pulumi stack tag set`,
pkg/cmd/pulumi/stack/stack_tag.go; tags are kept by the DIY backend since #19882, pkg/backend/diy/stack_tags.go,
and merged, not replaced, by each update: pkg/backend/stack.go GetMergedStackTags). Its value is the sweep's own
random id, kept in the journal: a stack without it, or with another sweep's, is never opened.
"""

from __future__ import annotations

import re
import secrets
from pathlib import Path

from components.settings.text import escaped

MARK_TAG = "tpu-vllm:sweep"
"""The tag's name (pkg/util/validation/stack.go validateStackTagName: `^[a-zA-Z0-9-_.:]{1,40}$`)."""
DIY_ORG = "organization"
# tokens/stack_name.go ParseStackName's characters and length, first character narrowed (see above).
STACK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
# httpstate/backend.go stackOwnerRegexp.
OWNER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9-_]{1,38}[a-zA-Z0-9]")
MARK = re.compile(r"[0-9a-f]{32}")


def new_mark() -> str:
    return secrets.token_hex(16)


def stack_part(reference: str) -> tuple[str | None, str | None]:
    """(the stack name a reference resolves to, None) or (None, why Pulumi or the sweep refuses it)."""
    shown = reference  # shown with !r: repr escapes every control and format character
    parts = reference.split("/")
    if len(parts) > 3:
        return None, f"{shown!r} has {len(parts)} parts; Pulumi takes NAME, ORG/NAME or ORG/PROJECT/NAME"
    name = parts[-1]
    if not STACK_NAME.fullmatch(name):
        return None, (f"{shown!r}: a stack name is 1 to 100 letters, digits, '-', '_' or '.', and the sweep's starts "
                      "with a letter or a digit (a leading '-' is read as a flag)")
    if len(parts) > 1 and not (parts[0] == DIY_ORG or OWNER_NAME.fullmatch(parts[0])):
        return None, f"{shown!r}: {parts[0]!r} is no organization Pulumi accepts"
    return name, None


def sweep_stack_problems(reference: str, base: str, project_dir: Path, project_name: str | None,
                         resumed_stack: str | None) -> list[str]:
    """Why `stack: reference` may not be the sweep's own stack (empty when it may). `resumed_stack`: the stack a
    journal of this sweep names (its own stack file is then expected)."""
    name, why = stack_part(reference)
    if name is None:
        return [f"stack = {why}; leave it out (default: BASE-sweep)"]
    parts = reference.split("/")
    if len(parts) == 3 and project_name is not None and parts[1] != project_name:
        return [f"stack = {reference!r}: a stack of project {parts[1]!r}, not this one ({project_name}); the sweep "
                "makes its stack in this project"]
    if name.casefold() == base.casefold():
        return [f"stack = {reference!r}: Pulumi resolves it to the base stack {base} itself, which the sweep would "
                "destroy at its end; leave it out (default: BASE-sweep)"]
    own_file = project_dir / f"Pulumi.{name}.yaml"
    others = sorted(path.name for path in project_dir.glob("Pulumi.*.yaml")
                    if path.name.casefold() == own_file.name.casefold())
    if others and (resumed_stack is None or resumed_stack.split("/")[-1].casefold() != name.casefold()):
        return [f"stack = {reference!r}: {others[0]} is a stack of this project that no journal of this sweep "
                "names; the sweep destroys its stack at its end, so it never takes one it did not make: leave "
                "stack out (default: BASE-sweep) or name a new one"]
    return []


def base_problem(base: str, project_dir: Path) -> str | None:
    """`base:` is a plain stack name with its stack file here (it becomes a file name: no path may pass)."""
    if "/" in base or not STACK_NAME.fullmatch(base):
        return (f"base = {base!r}: not a stack name (1 to 100 letters, digits, '-', '_' or '.', no '/'); "
                "name a stack of this project (e.g. dev)")
    if not (project_dir / f"Pulumi.{base}.yaml").is_file():
        return (f"base = {base!r}: there is no Pulumi.{base}.yaml in {escaped(str(project_dir))}; name a stack of "
                "this project (e.g. dev)")
    return None


def mark_problem(stack: str, tags: dict[str, str], mark: str | None) -> str | None:
    """Why an existing stack is not the sweep's to open, from its tags; None when it carries this sweep's mark."""
    found = tags.get(MARK_TAG)
    if found is None:
        return (f"stack {stack} exists and carries no {MARK_TAG} tag: the sweep did not make it, and never deploys, "
                "destroys or removes a stack it did not make; name another stack (stack: in the sweep file)")
    if mark is None or found != mark:
        return (f"stack {stack} was made by another sweep (its {MARK_TAG} tag is not this journal's mark); resume "
                "that sweep with its own --out, or name another stack")
    return None
