"""``multiqueue completion bash|zsh|fish``: loaded in the real shell, each script completes the commands, flags and
fixed values the parser knows, at any depth, and the same ones in all three (one table of cases for every shell)."""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from multiqueue.cli import build_parser
from tests.support.processes import REPO


def _parser_offers(*path: str) -> list[str]:
    """What ``multiqueue <path>`` takes next, read straight from the parser (flags and subcommands, in its order):
    the commands' flags change as the commands grow, and each shell must follow the parser wherever it goes."""
    parser = build_parser()
    for name in path:
        parser = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    offered: list[str] = []
    for action in parser._actions:
        offered += (
            list(action.choices) if isinstance(action, argparse._SubParsersAction) else action.option_strings
        )
    return offered


CASES = [
    (["multiqueue", "st"], ["status"]),
    (["multiqueue", ""], _parser_offers()),
    (["multiqueue", "status", "-o", ""], ["wide", "json", "yaml", "name"]),
    (["multiqueue", "status", "--config", "m.yaml", "-"], _parser_offers("status")),
    (["multiqueue", "local", "u"], ["up"]),
    (["multiqueue", "local", "up", "--control-plane", "e"], ["embedded"]),
    (["kubectl-multiqueue", "logs", "job", "--t"], ["--tail", "--timestamps"]),
    (["multiqueue", "completion", ""], ["-h", "--help", "bash", "zsh", "fish"]),
    (["multiqueue", "completion", "z"], ["zsh"]),
    (["multiqueue", "nonsense", "--"], ["--help", "--version"]),
]
# Two more that zsh and fish answer in their scripts, and bash leaves to readline: a word begun with a quote, and,
# where nothing the parser knows matches, a file name (`-o default`); they run in a folder holding just m.yaml.
BEYOND_BASH = [(["multiqueue", "'st"], ["status"]), (["multiqueue", "status", "--config", "m"], ["m.yaml"])]


def _shell(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        print(f"no {name} on this machine")
        pytest.skip(f"no {name} on this machine")
    return found


def _script(shell: str, folder: Path) -> Path:
    """The script ``multiqueue completion <shell>`` prints, saved in ``folder``."""
    script = subprocess.run(
        [sys.executable, "-m", "multiqueue", "completion", shell],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = folder / f"multiqueue.{shell}"
    path.write_text(script)
    return path


def _files_only(tmp_path: Path) -> Path:
    """An empty home and a working folder with only ``m.yaml``: no rc file or stray name changes an answer."""
    (tmp_path / "home").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    (work / "m.yaml").write_text("")
    return work


def test_bash_completes_what_the_parser_knows(tmp_path: Path) -> None:
    bash = _shell("bash")
    lines = [f"source {shlex.quote(str(_script('bash', tmp_path)))}"]
    for words, _ in CASES:
        lines.append(
            f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)}); COMP_CWORD={len(words) - 1}; "
            '_multiqueue_complete; echo "${COMPREPLY[*]}"'
        )
    lines.append("complete -p multiqueue kubectl-multiqueue")
    result = subprocess.run([bash, "-c", "\n".join(lines)], capture_output=True, text=True, check=True)
    assert result.stderr == ""
    got = result.stdout.splitlines()
    assert got[: len(CASES)] == [" ".join(expected) for _, expected in CASES]
    # no match leaves COMPREPLY empty, and then readline completes a file name
    assert got[len(CASES) :] == [
        "complete -o default -F _multiqueue_complete multiqueue",
        "complete -o default -F _multiqueue_complete kubectl-multiqueue",
    ]


def _zsh_harness(script: Path, fpath_dir: Path | None, results: Path) -> str:
    """A zsh program that runs an interactive zsh in a pseudo-terminal (zpty), loads the script as a user would,
    types each case and a Tab, and writes what the completion system was offered, one line per case.

    Tab is bound to a completion widget that runs the whole completion system (``_main_complete``) while a
    ``compadd`` wrapper records the words that match what is typed (``compadd -O``) before adding them as usual;
    nothing is inserted, so Ctrl-U clears the line for the next case. Each Tab ends by printing ``<done N>``,
    which the harness waits for before it types on: keys typed ahead of a running widget would be lost.
    """
    if fpath_dir is None:  # as kubectl's users do: compinit in .zshrc, then source the script
        load = ["autoload -Uz compinit && compinit -u -D", f"source {shlex.quote(str(script))}"]
    else:  # the script saved as _multiqueue in a folder of $fpath: compinit autoloads it on the first Tab
        (fpath_dir / "_multiqueue").write_text(script.read_text())
        load = [f"fpath=({shlex.quote(str(fpath_dir))} $fpath)", "autoload -Uz compinit && compinit -u -D"]
    setup = [
        "PS1='' PROMPT_EOL_MARK='' && bindkey -e",
        *load,
        # callers that collect matches themselves (-O, -A, -D among the options, before the words) go straight on
        'compadd() { local -a m o=("${(@)argv[1,${argv[(i)(-|--)]}-1]}"); '
        'if (( $o[(I)-[OAD]] )); then builtin compadd "$@"; return; fi; '
        'builtin compadd -O m "$@"; _mq_got+=($m); builtin compadd "$@" }',
        f'_mq_capture() {{ _mq_got=(); _main_complete; print -r -- "${{(j: :)_mq_got}}" >> {results}; '
        'compstate[insert]=""; compstate[list]=""; print -n "<done $((++_mq_n))>" }',
        'zle -C mq-capture complete-word _mq_capture && bindkey "^I" mq-capture',
    ]
    lines = ["zmodload zsh/zpty", "zpty mq zsh -f -i"]
    lines += [f"zpty -w mq {shlex.quote(line)}" for line in setup]
    for n, (words, _) in enumerate([*CASES, *BEYOND_BASH], start=1):
        lines.append(f"zpty -w -n mq {shlex.quote(' '.join(words))}$'\\t'")
        lines.append(f"zpty -r mq reply {shlex.quote(f'*<done {n}>*')}")
        lines.append("zpty -w -n mq $'\\C-u'")
    lines.append("zpty -d mq")
    return "\n".join(lines)


@pytest.mark.parametrize("loaded", ["sourced", "from fpath"])
def test_zsh_completes_what_the_parser_knows(tmp_path: Path, loaded: str) -> None:
    zsh = _shell("zsh")
    work = _files_only(tmp_path)
    script = _script("zsh", tmp_path)
    results = tmp_path / "offered"
    fpath_dir = None
    if loaded == "from fpath":
        fpath_dir = tmp_path / "functions"
        fpath_dir.mkdir()
    harness = _zsh_harness(script, fpath_dir, results)
    environment = {**os.environ, "HOME": str(tmp_path / "home")}
    run = subprocess.run(
        [zsh, "-f", "-c", harness], cwd=work, env=environment, capture_output=True, timeout=60
    )
    assert run.returncode == 0, run.stderr.decode()
    got = results.read_text().splitlines()
    assert got == [" ".join(expected) for _, expected in [*CASES, *BEYOND_BASH]]


def test_zsh_script_starts_compinit_when_the_user_has_not(tmp_path: Path) -> None:
    """``compdef`` exists only once compinit has run; sourced without it, the script runs it rather than fail."""
    zsh = _shell("zsh")
    script = _script("zsh", tmp_path)
    (tmp_path / "home").mkdir()
    probe = (
        f"source {shlex.quote(str(script))} && print -r -- $_comps[multiqueue] $_comps[kubectl-multiqueue]"
    )
    result = subprocess.run(
        [zsh, "-f", "-c", probe],
        env={**os.environ, "HOME": str(tmp_path / "home")}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, "_multiqueue _multiqueue\n", "")


def _fish_word(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def test_fish_completes_what_the_parser_knows(tmp_path: Path) -> None:
    fish = _shell("fish")
    work = _files_only(tmp_path)
    script = _script("fish", tmp_path)
    lines = [f"source {_fish_word(str(script))}"]
    for words, _ in [*CASES, *BEYOND_BASH]:
        lines.append(f"complete -C {_fish_word(' '.join(words))} | string join ' '; echo '<end>'")
    environment = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [fish, "--no-config", "-c", "\n".join(lines)],
        cwd=work, env=environment, capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert result.stderr == ""
    got = [answer.strip("\n") for answer in result.stdout.split("<end>\n")[:-1]]
    assert got == [" ".join(expected) for _, expected in [*CASES, *BEYOND_BASH]]


def test_only_known_shells_are_offered() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "multiqueue", "completion", "powershell"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2 and "invalid choice: 'powershell'" in result.stderr and result.stdout == ""
