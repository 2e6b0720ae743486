"""Run a workflow's actions/github-script step under node, against a fake GitHub that records each call.

The step's own `script:` text runs as actions/github-script@v7 runs it: the body of an async function given
`require`, `github`, `context` and `core` (src/async-function.ts), with the step's env as process.env.
"""

from __future__ import annotations

import base64
import html
import json
import re
import subprocess
import urllib.parse
from pathlib import Path

HARNESS = """
const fs = require('fs');
const script = fs.readFileSync(process.argv[2], 'utf8');
const scenario = JSON.parse(fs.readFileSync(process.argv[3], 'utf8'));
const calls = [];
const core = {
  setFailed: (message) => calls.push(['setFailed', message]),
  notice: (message) => calls.push(['notice', message]),
  setOutput: (name, value) => calls.push(['setOutput', name, value]),
  setSecret: (secret) => calls.push(['setSecret', secret]),
};
const github = {
  rest: {
    pulls: {
      get: async (args) => { calls.push(['pulls.get', args]); return { data: scenario.pr }; },
    },
    issues: {
      listComments: 'issues.listComments',
      createComment: async (args) => { calls.push(['createComment', args]); return {}; },
      updateComment: async (args) => { calls.push(['updateComment', args]); return {}; },
    },
  },
  paginate: async (endpoint, args) => { calls.push(['paginate', endpoint, args]); return scenario.comments; },
};
// @actions/github's Context: the event payload, the repository, the server and the run.
const context = {
  repo: { owner: 'owner', repo: 'repo' }, payload: scenario.payload, serverUrl: 'https://github.com', runId: 42,
};
const AsyncFunction = Object.getPrototypeOf(async () => null).constructor;
new AsyncFunction('require', 'github', 'context', 'core', script)(require, github, context, core)
  .catch((error) => calls.push(['threw', error.message]))
  .then(() => process.stdout.write(JSON.stringify(calls)));
"""


def pull_request(sha: str, repository: str = "owner/repo", branch: str = "feature") -> dict:
    """The fields of GET /repos/{owner}/{repo}/pulls/{n} the scripts read: a pull request's `head` {ref, sha, repo},
    whose `repo` may be null (a deleted fork): octokit/webhooks payload-schemas/api.github.com/common/
    pull-request.schema.json (v7.6.1-43)."""
    return {"head": {"sha": sha, "ref": branch, "repo": {"full_name": repository} if repository else None}}


def run_github_script(tmp_path: Path, script: str, *, payload: dict, env: dict[str, str],
                      comments: list | None = None, pr: dict | None = None) -> list:
    """The calls the script made: pulls.get (answered with `pr`), paginate (listComments), createComment,
    updateComment, core.*."""
    (tmp_path / "script.js").write_text(script)
    (tmp_path / "harness.js").write_text(HARNESS)
    (tmp_path / "scenario.json").write_text(json.dumps({"payload": payload, "pr": pr or pull_request(""),
                                                        "comments": comments or []}))
    result = subprocess.run(["node", str(tmp_path / "harness.js"), str(tmp_path / "script.js"),
                             str(tmp_path / "scenario.json")], capture_output=True, text=True, timeout=60,
                            env={"PATH": "/usr/bin:/bin:/usr/local/bin", **env})
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def writes(calls: list) -> list:
    return [call for call in calls if call[0] in ("createComment", "updateComment")]


def fenced(body: str) -> str:
    """The text inside the body's one code fence, which must close on the body's last line.

    As GitHub renders it: a backtick fence closes at the first later line of as many backticks or more, indented
    by up to three spaces and followed only by spaces (CommonMark 0.29, "Fenced code blocks", which GFM follows).
    """
    lines = body.split("\n")
    start = next(i for i, line in enumerate(lines) if re.fullmatch(r"`{3,}text", line))
    width = len(lines[start]) - len("text")
    closing = re.compile(" {0,3}" + "`" * width + "`* *")
    end = next(i for i in range(start + 1, len(lines)) if closing.fullmatch(lines[i]))
    assert end == len(lines) - 1, f"the fence closes early, at line {end}:\n{body}"
    return "\n".join(lines[start + 1:end])


# --- Hostile output: every form a credential can take in text, and text that must get through ------------------

def credential_forms(value: str) -> dict[str, str]:
    """`value` as program output, an error, a log line or a file may carry it (computed here, in Python, apart from
    the scripts' own matching): literal, JSON (ASCII-escaped or not, escaped twice), URL-encoded (path, component,
    form, lower-case hex, encoded twice), backslash-escaped, HTML-escaped, cut by a line wrap, and base64 (standard
    and URL-safe) at each of the 3 offsets in a 3-byte group, whole and wrapped."""
    quoted = urllib.parse.quote(value, safe="")
    half = len(value) // 2
    forms = {
        "literal": value,
        "json": json.dumps(value)[1:-1],
        "json-utf8": json.dumps(value, ensure_ascii=False)[1:-1],
        "json-twice": json.dumps(json.dumps(value))[1:-1],
        "url": quoted,
        "url-path": urllib.parse.quote(value),
        "url-form": urllib.parse.quote_plus(value),
        "url-lower": re.sub(r"%[0-9A-F]{2}", lambda match: match[0].lower(), quoted),
        "url-twice": urllib.parse.quote(quoted, safe=""),
        "backslash": re.sub(r"([^A-Za-z0-9_])", r"\\\1", value),
        "html": html.escape(value),
        "wrapped": f"{value[:half]}\n    {value[half:]}",
        # A wrapped value as Python's repr() and JSON print it: the wrap escaped, indentation or a CR with it.
        "repr-wrapped": repr(f"{value[:half]}\n    {value[half:]}")[1:-1],
        "json-wrapped": json.dumps(f"{value[:half]}\n    {value[half:]}")[1:-1],
        "json-crlf-wrapped": json.dumps(f"{value[:half]}\r\n{value[half:]}")[1:-1],
        "json-tab-wrapped": json.dumps(f"{value[:half]}\n\t\t{value[half:]}")[1:-1],
        # base64.encodebytes (MIME: 76-column lines) in JSON: the lines joined by an escaped `\n`.
        "json-mime-base64": json.dumps(base64.encodebytes(value.encode()).decode())[1:-1],
    }
    for offset in range(3):
        data = b"\x01\x02"[:offset] + value.encode()
        encoded = base64.b64encode(data).decode()
        forms[f"base64+{offset}"] = encoded
        forms[f"base64url+{offset}"] = base64.urlsafe_b64encode(data).decode()
        forms[f"base64-wrapped+{offset}"] = "\n".join(encoded[i:i + 20] for i in range(0, len(encoded), 20))
    return forms


# Token shapes, none of them in the step's environment: each must be masked by its shape alone.
TOKENS = {
    "pulumi": "pul-" + "f00dcafe" * 5,
    "github-classic": "ghp_CANARYghpTokenQx7Vm3Kp9Zr2Lw8Ht5Nb4Jc",
    "github-installation": "ghs_CANARYghsTokenRw4Tn8Yq1Ue5Io9Pa3Sd7Fg",
    "github-fine-grained": "github_pat_11CANARY0" + "a1B2c3D4e5" * 7 + "zz",
    "google-access": "ya29.a0CANARYgoogleAccessToken-Hk2Jl6Zx0_Cv4Bn8Mq",
    "google-api-key": "AIzaSyCANARYWe3Rt7Yu1Io5Pa9Sd2Fg6Hj0Kl4Zx",
    "jwt": ("eyJhbGciOiJSUzI1NiIsImtpZCI6IkNBTkFSWSJ9.eyJzdWIiOiJyZXBvOm93bmVyL3JlcG8iLCJDQU5BUlkiOnRydWV9"
            ".Q0FOQVJZc2lnbmF0dXJlMDEyMzQ1Njc4OQ"),
    "hugging-face": "hf_CANARYhuggingFaceMn5Bv9Cx3Za7Lk1Jh6Gf",
    "pem": ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQCcanary\n"
            "Q0FOQVJZIHByaXZhdGUga2V5IGJvZHkgMDEyMzQ1Njc4OQ==\n-----END PRIVATE KEY-----"),
    "pem-in-json": ("-----BEGIN OPENSSH PRIVATE KEY-----\\nb3BlbnNzaC1rZXktdjEAAAAACANARYopensshKeyBody\\n"
                    "-----END OPENSSH PRIVATE KEY-----"),
}
# A service account key file as gcloud and the IAM console write it (pretty-printed), and a PEM key: base64'd, they
# start `ewog...`/`eyAi...` and `LS0tLS1CRUdJTi...`, and base64(1) and MIME wrap them at 76 columns.
KEY_FILE = {"type": "service_account", "project_id": "canary-project", "private_key_id": "c0ffee" * 6,
            "private_key": TOKENS["pem"] + "\n", "client_email": "canary@canary-project.iam.gserviceaccount.com"}
PEM_BYTES = (TOKENS["pem"] + "\n").encode()
TOKENS.update({
    "key-file-base64": base64.encodebytes(json.dumps(KEY_FILE, indent=2).encode()).decode().strip(),
    "key-file-base64-tabs": base64.b64encode(json.dumps(KEY_FILE, indent="\t").encode()).decode(),
    "key-file-base64-spaced": base64.b64encode(json.dumps(KEY_FILE).replace("{", "{ ", 1).encode()).decode(),
    "key-file-base64-crlf-json": json.dumps(base64.encodebytes(
        json.dumps(KEY_FILE, indent=2).replace("\n", "\r\n").encode()).decode())[1:-1],
    "pem-base64": base64.encodebytes(PEM_BYTES).decode().strip(),
    "pem-base64-one-line": base64.b64encode(PEM_BYTES).decode(),
    "pem-base64-json": json.dumps(base64.encodebytes(PEM_BYTES).decode())[1:-1],
})
# A private key the output cuts before its end: masked to the end of the text (it is placed last).
CUT_PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAcanaryCutKeyBodyQw2Er6Ty0Ui4Op\nQ0FOQVJZ"
# What a preview or a plan diff shows that is no credential: it reaches the comment as it is.
INNOCENT = (
    "    gcp:compute:Firewall: (create)",
    "        [urn=urn:pulumi:dev::tpu-vllm::gcp:compute/firewall:Firewall::tpu-vllm-dev-ssh]",
    "commit 0123456789abcdef0123456789abcdef01234567, image sha256:" + "ab" * 32,
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIPreviewUserKey tpu-vllm",
    "-----BEGIN CERTIFICATE-----",  # public: only a private key is masked
    # a kubeconfig's certificate (public), base64'd: not taken for a base64'd private key
    "certificate-authority-data: " + base64.b64encode(
        b"-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAKHBfpegPjMCMA0GCSqGSIb3DQEBCwUAMBExDzANBgNVBAMMBmNhbmFyeTAeFw0y\n"
        b"-----END CERTIFICATE-----\n").decode(),
    "words that start like tokens: pul-up, ghp_x, hf_hub, eyJ, ya29., AIza, github_pat_",
    "Resources:\n    31 unchanged",
)


def hostile_output(values: dict[str, str]) -> tuple[str, dict[str, str]]:
    """Text with every form of each known value and every token shape among innocent lines; and those forms."""
    forms = {f"{name} {kind}": form for name, value in values.items()
             for kind, form in credential_forms(value).items()}
    forms.update({f"token {name}": token for name, token in TOKENS.items()})
    forms["token cut pem"] = CUT_PEM
    lines = [INNOCENT[0]]
    for index, (label, form) in enumerate(forms.items()):
        if label != "token cut pem":
            lines += [f"{label}: {form} (end)", INNOCENT[index % len(INNOCENT)]]
    lines += [*INNOCENT, f"cut: {CUT_PEM}"]
    return "\n".join(lines) + "\n", forms


def leaks(body: str, forms: dict[str, str], window: int = 12) -> list[str]:
    """Each form of which any `window` characters in a row reach the body (a part of a credential is a leak too),
    but for those an innocent line holds too (the base64 of `-----BEGIN ` is a certificate's as well as a key's)."""
    public = "\n".join(INNOCENT)
    found = []
    for label, form in forms.items():
        pieces = {form[i:i + window] for i in range(max(1, len(form) - window + 1))}
        pieces = {piece for piece in pieces if piece not in public}
        if any(piece in body for piece in pieces):
            found.append(label)
    return found
