"""``multiqueue completion bash``: sourced in bash, it completes the commands, flags and fixed values the parser
knows, at any depth."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys

import pytest

from tests.support.processes import REPO

CASES = [
    (["multiqueue", "st"], ["status"]),
    (
        ["multiqueue", ""],
        ["-h", "--help", "--version", "validate", "manager", "status", "logs", "completion", "local"],
    ),
    (["multiqueue", "status", "-o", ""], ["wide", "json", "yaml", "name"]),
    (
        ["multiqueue", "status", "--config", "m.yaml", "-"],
        ["-h", "--help", "--config", "-n", "--namespace", "-A", "--all-namespaces", "-o", "--output"],
    ),
    (["multiqueue", "local", "u"], ["up"]),
    (["multiqueue", "local", "up", "--control-plane", "e"], ["embedded"]),
    (["kubectl-multiqueue", "logs", "job", "--t"], ["--tail", "--timestamps"]),
    (["multiqueue", "completion", "b"], ["bash"]),
    (["multiqueue", "nonsense", "--"], ["--help", "--version"]),
]


def test_bash_completes_what_the_parser_knows() -> None:
    bash = shutil.which("bash")
    if bash is None:
        print("no bash on this machine")
        pytest.skip("no bash on this machine")
    script = subprocess.run(
        [sys.executable, "-m", "multiqueue", "completion", "bash"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [script]
    for words, _ in CASES:
        lines.append(
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
            '_multiqueue_complete; echo "${COMPREPLY[*]}"'
        )
    result = subprocess.run([bash, "-c", "\n".join(lines)], capture_output=True, text=True, check=True)
    assert result.stderr == ""
    got = result.stdout.splitlines()
    assert got == [" ".join(expected) for _, expected in CASES]


def test_only_known_shells_are_offered() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "multiqueue", "completion", "fish"], cwd=REPO, capture_output=True, text=True
    )
    assert result.returncode == 2 and "invalid choice: 'fish'" in result.stderr and result.stdout == ""
