"""``tunnelbench completion bash|zsh``: a shell completion script, generated from the
command line's own parser.

The script holds what the parser holds at the time it is printed: the verbs and their
sub-verbs, each one's options, and the values of every option or argument whose value is
one of a set (argparse ``choices``: tunnel kinds from the registry, directions, formats,
...), so it follows every new verb, option and kind without a list to keep in step. An
option whose metavar is ``PATH`` completes file names, as do positional arguments without
a set (plan files); other values (a rate, a count) complete nothing. A comma list
(``--tunnels none,wi``) completes its last item. zsh runs the bash function through
``bashcompinit``, so both shells complete the same words.
"""

import argparse
import shlex
from dataclasses import dataclass, field

from tunnelbench.cli.options import comma_list
from tunnelbench.cli.parsing import Verbs

SHELLS = ("bash", "zsh")
FUNCTION = "_tunnelbench"


@dataclass
class _Command:
    """One verb (or the top level, path ``""``): what may follow it."""

    path: str  # "/plan/show"
    verbs: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)
    #: Options that take a value, each with its set of values (empty: any, e.g. a path).
    values: dict[str, list[str]] = field(default_factory=dict)
    #: Values of a positional argument that is one of a set.
    positional: list[str] = field(default_factory=list)
    #: Options that take a comma list.
    lists: set[str] = field(default_factory=set)
    #: Options that take a file's path.
    paths: set[str] = field(default_factory=set)


def commands(parser: argparse.ArgumentParser, path: str = "") -> list[_Command]:
    """Every command of ``parser``, its own first, then its verbs' in order."""
    command = _Command(path)
    found = [command]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                command.verbs.append(name)
                found += commands(sub, f"{path}/{name}")
        elif action.option_strings:
            command.options += action.option_strings
            if action.nargs != 0:
                for option in action.option_strings:
                    command.values[option] = [str(c) for c in action.choices or ()]
                    if action.type is comma_list:
                        command.lists.add(option)
                    if action.metavar == "PATH":
                        command.paths.add(option)
        elif action.choices:
            command.positional += [str(c) for c in action.choices]
    return found


def _words(items: list[str]) -> str:
    return shlex.quote(" ".join(items))


def bash(parser: argparse.ArgumentParser) -> str:
    """The bash completion script: one function, ``_tunnelbench``, bound to the command."""
    table = commands(parser)
    descend = " | ".join(f'"{c.path}"' for c in table if c.path) or '""'
    takes_value, value_arms = [], []
    for c in table:
        for option, values in c.values.items():
            takes_value.append(f'"{c.path} {option}"')
            if option in c.paths:
                reply = 'COMPREPLY=( $(compgen -f -- "$cur") )'
            elif not values:
                reply = "COMPREPLY=()"
            elif option in c.lists:
                reply = f"_tunnelbench_list {_words(values)}"
            else:
                reply = f'COMPREPLY=( $(compgen -W {_words(values)} -- "$cur") )'
            value_arms.append(f'        "{c.path} {option}") {reply}; return ;;')
    option_arms = [
        f'            "{c.path}") COMPREPLY=( $(compgen -W {_words(c.options)} -- "$cur") ) ;;'
        for c in table
    ]
    word_arms = [
        f'        "{c.path}") COMPREPLY=( $(compgen -W {_words(c.verbs or c.positional)}'
        ' -- "$cur") ) ;;'
        for c in table
        if c.verbs or c.positional
    ]
    return "\n".join(
        [
            "# bash completion for tunnelbench, generated from its parser by",
            '# `tunnelbench completion bash`. Enable: eval "$(tunnelbench completion bash)"',
            "",
            "_tunnelbench_list() {",
            "    # A comma list: complete its last item, keeping the items before it.",
            '    local head=""',
            '    [[ $cur == *,* ]] && head="${cur%,*},"',
            '    COMPREPLY=( $(compgen -P "$head" -W "$1" -- "${cur##*,}") )',
            "}",
            "",
            f"{FUNCTION}() {{",
            '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="" path="" word skip=0 i',
            '    (( COMP_CWORD > 0 )) && prev="${COMP_WORDS[COMP_CWORD-1]}"',
            "    # --option=value: bash splits it at '='.",
            '    if [[ $cur == "=" ]]; then cur=""',
            '    elif [[ $prev == "=" && COMP_CWORD -gt 1 ]]; then',
            '        prev="${COMP_WORDS[COMP_CWORD-2]}"',
            "    fi",
            "    # The verb path so far, skipping every option's value.",
            "    for (( i = 1; i < COMP_CWORD; i++ )); do",
            '        word="${COMP_WORDS[i]}"',
            '        if (( skip )); then skip=0; [[ $word == "=" ]] && skip=1; continue; fi',
            '        case "$path $word" in',
            f"            {' | '.join(takes_value) or '__none__'}) skip=1; continue ;;",
            "        esac",
            '        case "$path/$word" in',
            f'            {descend}) path="$path/$word" ;;',
            "        esac",
            "    done",
            '    case "$path $prev" in',
            *value_arms,
            "    esac",
            "    if [[ $cur == -* ]]; then",
            '        case "$path" in',
            *option_arms,
            "        esac",
            "        return",
            "    fi",
            '    case "$path" in',
            *word_arms,
            '        *) COMPREPLY=( $(compgen -f -- "$cur") ) ;;',
            "    esac",
            "}",
            "",
            f"complete -F {FUNCTION} tunnelbench",
            "",
        ]
    )


def zsh(parser: argparse.ArgumentParser) -> str:
    """The zsh script: the bash function, run by zsh's bash-completion emulation."""
    return "\n".join(
        [
            "#compdef tunnelbench",
            "# zsh completion for tunnelbench, generated from its parser by",
            '# `tunnelbench completion zsh`. Enable: eval "$(tunnelbench completion zsh)"',
            "autoload -U +X compinit && compinit",
            "autoload -U +X bashcompinit && bashcompinit",
            "",
            bash(parser),
        ]
    )


def register(verbs: Verbs) -> None:
    completion = verbs.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description='Print a completion script for the shell. Enable it with eval "$(tunnelbench'
        ' completion bash)" in ~/.bashrc, or save it as'
        " ~/.local/share/bash-completion/completions/tunnelbench.",
    )
    completion.add_argument("shell", choices=SHELLS)
    completion.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    parser: argparse.ArgumentParser = args.parser
    print(bash(parser) if args.shell == "bash" else zsh(parser), end="")
    return 0
