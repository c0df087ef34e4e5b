"""The fenced blocks of the README and the docs, read as the tests that run them need them: a walkthrough's shell
lines, a manifest, the files the text asks to save."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.support.processes import REPO


def shell_blocks(document: str, heading: str) -> list[str]:
    """The ```sh blocks of ``document`` under the heading ``heading`` (up to the next heading of its level)."""
    text = (REPO / document).read_text()
    level = heading.split(" ", 1)[0]
    start = text.index(heading + "\n")
    following = re.search(rf"^{re.escape(level)} ", text[start + len(heading) :], re.MULTILINE)
    section = text[start : start + len(heading) + following.start()] if following else text[start:]
    return re.findall(r"```sh\n(.*?)```", section, re.DOTALL)


def yaml_block(document: str, heading: str) -> str:
    text = (REPO / document).read_text()
    section = text[text.index(heading + "\n") :]
    found = re.search(r"```yaml\n(.*?)```", section, re.DOTALL)
    assert found is not None, f"no yaml block under {heading} in {document}"
    return found.group(1)


def named_files(document: str) -> dict[str, str]:
    """The ```yaml blocks of ``document`` that open with the name the text asks to save them as (``# big.yaml``)."""
    text = (REPO / document).read_text()
    return dict(re.findall(r"```yaml\n# (\S+\.yaml)\n(.*?)```", text, re.DOTALL))


def run_block(block: str, env: dict[str, str]) -> None:
    """A documented command block, as written, from the repository; its output goes to the test log."""
    print(f"+ {block.strip()}", file=sys.stderr, flush=True)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    print(done.stdout + done.stderr, file=sys.stderr, flush=True)
    assert done.returncode == 0, f"{block.strip()} exited {done.returncode}: {done.stderr[-2000:]}"
