"""``tunnelbench completion``: the scripts are valid shell, and the bash function, sourced
in a real bash, completes verbs, options and values as the parser defines them."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tunnelbench.cli import completion, main
from tunnelbench.tunnels import REGISTRY as TUNNELS

SRC = Path(__file__).resolve().parents[2] / "src"


def script(shell: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tunnelbench", "completion", shell],
        env={**os.environ, "PYTHONPATH": str(SRC)}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return done.stdout


@pytest.fixture(scope="module")
def bash_script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "tunnelbench.bash"
    path.write_text(script("bash"))
    return path


def complete(bash_script: Path, line: str, cwd: Path | None = None) -> set[str]:
    """The candidates bash offers for the last word of ``line`` (a trailing space: a new,
    empty word), as the completion function leaves them in COMPREPLY. Like bash, an
    ``=`` is a word of its own (COMP_WORDBREAKS)."""
    words = line.replace("=", " = ").split()
    if line.endswith(" "):
        words.append("")
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source '{bash_script}'\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD={len(words) - 1}\n"
        "_tunnelbench\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", program],
        cwd=cwd, capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    return {w for w in done.stdout.split("\n") if w}


def test_the_bash_script_is_valid_bash(bash_script: Path) -> None:
    done = subprocess.run(["bash", "-n", str(bash_script)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_zsh_script_is_valid_zsh(tmp_path: Path) -> None:
    if shutil.which("zsh") is None:
        pytest.skip("zsh is not installed here: `zsh -n` cannot check the zsh script")
    path = tmp_path / "_tunnelbench"
    path.write_text(script("zsh"))
    done = subprocess.run(["zsh", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_zsh_script_runs_the_bash_function_through_bashcompinit() -> None:
    text = completion.zsh(main.parser())
    assert text.startswith("#compdef tunnelbench\n")
    assert "bashcompinit" in text
    assert completion.bash(main.parser()) in text


def test_verbs(bash_script: Path) -> None:
    assert complete(bash_script, "tunnelbench r") == {"run", "report", "runs"}
    verbs = {name for verb in main.VERBS for name in [verb.__name__.rsplit(".", 1)[-1]]}
    assert complete(bash_script, "tunnelbench ") == verbs
    assert complete(bash_script, "tunnelbench plan ") == {"show"}
    assert complete(bash_script, "tunnelbench lab s") == {"status"}
    assert complete(bash_script, "tunnelbench completion ") == {"bash", "zsh"}


def test_options(bash_script: Path) -> None:
    assert complete(bash_script, "tunnelbench run --tun") == {"--tunnels", "--tunnel-mtu"}
    assert complete(bash_script, "tunnelbench plan show --") == {
        "--help",
        "--quick",
        "--json",
        "--db",
        "--hosts",
    }
    assert {"--db", "--json"} <= complete(bash_script, "tunnelbench runs --")


def test_values_come_from_the_registry_and_the_enums(bash_script: Path) -> None:
    kinds = {kind.value for kind in TUNNELS.kinds()}
    assert complete(bash_script, "tunnelbench run --tunnels ") == kinds
    assert complete(bash_script, "tunnelbench tune --tunnel wi") == {"wireguard"}
    assert complete(bash_script, "tunnelbench run --tunnels none,wi") == {"none,wireguard"}
    assert complete(bash_script, "tunnelbench run --direction d") == {"download"}
    assert complete(bash_script, "tunnelbench report --format=j") == {"json"}
    assert complete(bash_script, "tunnelbench run --duration ") == set()


def test_option_values_are_not_taken_for_verbs(bash_script: Path) -> None:
    # "run" after --db is the database's name, not the verb.
    assert complete(bash_script, "tunnelbench --verbose lab --help ") == {
        "up", "status", "exec", "down", "clean"
    }  # fmt: skip
    assert complete(bash_script, "tunnelbench report --db run --format c") == {"csv"}


def test_paths_complete_file_names(bash_script: Path, tmp_path: Path) -> None:
    (tmp_path / "results.db").write_text("")
    (tmp_path / "plan.toml").write_text("")
    assert complete(bash_script, "tunnelbench runs --db re", cwd=tmp_path) == {"results.db"}
    assert complete(bash_script, "tunnelbench plan show p", cwd=tmp_path) == {"plan.toml"}
