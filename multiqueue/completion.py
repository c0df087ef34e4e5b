"""Shell completion for ``multiqueue``, as ``kubectl completion bash|zsh|fish`` gives it: generated from the
command's own argument parser, so every command, flag and fixed choice the parser knows completes, and nothing it
does not. The three scripts carry the same two tables from ``_vocabulary`` and walk them the same way: skip flags,
follow each word that names a subcommand of the path so far, offer a flag's fixed values after it, otherwise the
path's subcommands and flags, and fall back to file names when nothing matches."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable, Sequence

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


def _rows(entries: dict[str, list[str]]) -> list[tuple[str, str]]:
    """Each key with its values as one space-separated string: the shape every shell's table takes, so a shell
    splits a value on spaces the same way."""
    return [(key, " ".join(values)) for key, values in sorted(entries.items())]


def _bash_table(name: str, entries: dict[str, list[str]]) -> str:
    items = " ".join(f"[{shlex.quote(k)}]={shlex.quote(v)}" for k, v in _rows(entries))
    return f"declare -gA {name}=({items})"


def bash(parser: argparse.ArgumentParser, commands: Sequence[str]) -> str:
    """A bash script that completes ``commands`` (the names the program runs under) when sourced."""
    words, choices = _vocabulary(parser)
    return "\n".join(
        [
            "# multiqueue completion for bash: source <(multiqueue completion bash)",
            _bash_table("_multiqueue_words", words),
            _bash_table("_multiqueue_choices", choices),
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


def _zsh_table(name: str, entries: dict[str, list[str]]) -> str:
    # declared, then assigned as key value pairs: the form every zsh 5 reads (typeset -A x=(...) needs 5.5)
    items = " ".join(f"{shlex.quote(k)} {shlex.quote(v)}" for k, v in _rows(entries))
    return f"typeset -gA {name}; {name}=({items})"


def zsh(parser: argparse.ArgumentParser, commands: Sequence[str]) -> str:
    """A native zsh completion function for ``commands``, registered with ``compdef`` when sourced. Saved as
    ``_multiqueue`` in a directory of ``$fpath`` it works too: compinit autoloads it by its ``#compdef`` line, and
    its first run defines the function and completes."""
    words, choices = _vocabulary(parser)
    function = "_multiqueue"
    return "\n".join(
        [
            f"#compdef {' '.join(commands)}",
            "# multiqueue completion for zsh: source <(multiqueue completion zsh)",
            _zsh_table("_multiqueue_words", words),
            _zsh_table("_multiqueue_choices", choices),
            f"{function}() {{",
            # not "path": in zsh that is $PATH as an array
            f"    local node={ROOT} word i",
            "    local -a candidates",
            "    for ((i = 2; i < CURRENT; i++)); do",
            "        word=${words[i]}",
            "        [[ $word == -* ]] && continue",
            '        (( ${+_multiqueue_words[$node $word]} )) && node="$node $word"',
            "    done",
            "    word=${words[CURRENT-1]}",
            "    if (( ${+_multiqueue_choices[$word]} )); then",
            "        candidates=(${(s: :)_multiqueue_choices[$word]})",
            "    else",
            "        candidates=(${(s: :)_multiqueue_words[$node]})",
            "    fi",
            "    compadd -- $candidates || _files",
            "}",
            # sourcing needs compdef, which only compinit defines
            "(( $+functions[compdef] )) || { autoload -Uz compinit && compinit; }",
            f"compdef {function} {' '.join(commands)}",
            # autoloaded from $fpath this whole file is the function's body: complete now, the word asked for
            f'if [[ ${{funcstack[1]}} == {function} ]]; then {function} "$@"; fi',
            "",
        ]
    )


def _fish_quote(value: str) -> str:
    """A fish single-quoted word: inside fish's single quotes a backslash escapes a quote and a backslash."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_table(name: str, entries: dict[str, list[str]]) -> list[str]:
    """fish has no associative arrays: two lists, keys and values at the same index."""
    rows = _rows(entries)
    return [
        f"set -g {name}_keys {' '.join(_fish_quote(k) for k, _ in rows)}",
        f"set -g {name}_values {' '.join(_fish_quote(v) for _, v in rows)}",
    ]


def fish(parser: argparse.ArgumentParser, commands: Sequence[str]) -> str:
    """A fish script that completes ``commands`` when sourced; it replaces any completions loaded before."""
    words, choices = _vocabulary(parser)
    function = "__multiqueue_complete"
    return "\n".join(
        [
            "# multiqueue completion for fish: multiqueue completion fish | source",
            *_fish_table("__multiqueue_words", words),
            *_fish_table("__multiqueue_choices", choices),
            f"function {function}",
            "    set -l tokens (commandline -opc)",
            "    set -l cur (commandline -ct | string unescape)",  # the word typed so far, without its quotes
            f"    set -l node {ROOT}",
            "    set -l i",
            "    for word in $tokens[2..-1]",
            "        string match -q -- '-*' $word; and continue",
            '        contains -- "$node $word" $__multiqueue_words_keys; and set node "$node $word"',
            "    end",
            "    set -l candidates",
            '    if set i (contains -i -- "$tokens[-1]" $__multiqueue_choices_keys)',
            "        set candidates (string split -n ' ' -- $__multiqueue_choices_values[$i])",
            '    else if set i (contains -i -- "$node" $__multiqueue_words_keys)',
            "        set candidates (string split -n ' ' -- $__multiqueue_words_values[$i])",
            "    end",
            # matched here, by prefix, rather than left to fish: its fuzzy matching would offer what bash does not
            "    set -l matching (string match -r -- '^'(string escape --style=regex -- \"$cur\")'.*' $candidates)",
            "    if set -q matching[1]",
            "        printf '%s\\n' $matching",
            "    else",
            '        __fish_complete_path "$cur"',
            "    end",
            "end",
            *(f"complete -c {c} -e; complete -c {c} -f -k -a '({function})'" for c in commands),
            "",
        ]
    )


SHELLS: dict[str, Callable[[argparse.ArgumentParser, Sequence[str]], str]] = {
    "bash": bash,
    "zsh": zsh,
    "fish": fish,
}
"""Each shell ``multiqueue completion`` offers, and the function that writes its script."""
