"""Run a workflow's actions/github-script step under node, against a fake GitHub that records each call.

The step's own `script:` text runs as actions/github-script@v7 runs it: the body of an async function given
`require`, `github`, `context` and `core` (src/async-function.ts), with the step's env as process.env.
"""

from __future__ import annotations

import json
import re
import subprocess
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
    """The fields of GET /repos/{owner}/{repo}/pulls/{n} the scripts read: `head` is a `pull-request` schema's
    {ref, sha, repo}, whose `repo` is null once a fork is deleted (GitHub REST "Get a pull request")."""
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
