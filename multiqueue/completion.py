"""Shell completion for ``multiqueue``, as ``kubectl completion bash`` gives it: generated from the command's own
argument parser, so every command, flag and fixed choice the parser knows completes, and nothing it does not."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Sequence

FUNCTION = "_multiqueue_complete"
ROOT = "multiqueue"


def _vocabulary(parser: argparse.ArgumentParser) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(command path -> the subcommands and flags it takes, flag -> the values it takes)."""
    words: dict[str, list[str]] = {}
    choices: dict[str, list[str]] = {}

    def walk(current: argparse.ArgumentParser, path: str) -> None:
        entries: list[str] = []
        for action in current._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    entries.append(name)
                    walk(sub, f"{path} {name}")
                continue
            entries.extend(action.option_strings)
            if not action.option_strings and action.choices is not None:
                entries.extend(str(c) for c in action.choices)  # a positional of fixed values
            if action.option_strings and action.choices is not None:
                for option in action.option_strings:
                    choices[option] = [str(c) for c in action.choices]
        words[path] = entries

    walk(parser, ROOT)  # bash refuses an empty key: every path starts with the root's
    return words, choices


def _bash_array(name: str, entries: dict[str, list[str]]) -> str:
    items = " ".join(f"[{shlex.quote(k)}]={shlex.quote(' '.join(v))}" for k, v in sorted(entries.items()))
    return f"declare -gA {name}=({items})"


def bash(parser: argparse.ArgumentParser, commands: Sequence[str]) -> str:
    """A bash script that completes ``commands`` (the names the program runs under) when sourced."""
    words, choices = _vocabulary(parser)
    return "\n".join(
        [
            "# multiqueue completion for bash: source <(multiqueue completion bash)",
            _bash_array("_multiqueue_words", words),
            _bash_array("_multiqueue_choices", choices),
            f"{FUNCTION}() {{",
            f'    local cur="${{COMP_WORDS[COMP_CWORD]}}" prev="${{COMP_WORDS[COMP_CWORD-1]}}" path={ROOT} word i',
            "    for ((i = 1; i < COMP_CWORD; i++)); do",
            '        word="${COMP_WORDS[i]}"',
            "        [[ $word == -* ]] && continue",
            '        if [[ -n "${_multiqueue_words["$path $word"]+set}" ]]; then path="$path $word"; fi',
            "    done",
            '    if [[ -n "${_multiqueue_choices[$prev]+set}" ]]; then',
            '        mapfile -t COMPREPLY < <(compgen -W "${_multiqueue_choices[$prev]}" -- "$cur")',
            "        return",
            "    fi",
            '    mapfile -t COMPREPLY < <(compgen -W "${_multiqueue_words[$path]}" -- "$cur")',
            "}",
            f"complete -o default -F {FUNCTION} {' '.join(commands)}",
            "",
        ]
    )
