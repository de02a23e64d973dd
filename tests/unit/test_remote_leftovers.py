"""What ``lab clean --hosts`` may act on: the directories killed runs left in a host's
/tmp, where anyone can make a directory of that name. The listing and the cleanup script
run for real in busybox's sh against real directories, modes and owners."""

import json
import os
import subprocess
from pathlib import Path

import pytest

from tunnelbench.remote import leftovers
from tunnelbench.remote.host import CLEANUP
from tunnelbench.remote.leftovers import Leftover

NOBODY = 65534
GOOD = "tunnelbench.0a1b2c3d.gw"
#: The listed name of a directory whose name holds a line break and a forged line.
FORGED = "tunnelbench.4?tunnelbench.44444444.gw?drwx------?0?yes???pid???2?"


def _made(root: Path, name: str, mode: int = 0o700, uid: int = 0, marker: Path | None = None):
    """A run directory as a killed run (or someone else) left it: an owner record of a
    process of this boot that is gone, and an undo line that leaves ``marker``."""
    d = root / name
    d.mkdir()
    (d / "owner").write_text(json.dumps({"boot_id": "x", "pid": 1, "start_time": 0}) + "\n")
    (d / "pids").write_text("")
    if marker is not None:
        (d / "undo").write_text(f"touch {marker}\n")
    d.chmod(mode)
    os.chown(d, uid, -1)
    return d


@pytest.mark.parametrize(
    ("leftover", "why"),
    [
        (Leftover(GOOD, "drwx------", 0, True, {}), None),
        (Leftover(GOOD, "drwxr-xr-x", 0, True, {}), None),
        (Leftover("tunnelbench.0a1b2c3d.gw2", "drwx------", 0, True, {}),
         "the name is not one tunnelbench gives (tunnelbench.<8 hex digits>.<role>)"),
        (Leftover("tunnelbench.evil", "drwx------", 0, True, {}),
         "the name is not one tunnelbench gives (tunnelbench.<8 hex digits>.<role>)"),
        (Leftover("tunnelbench.0A1B2C3D.gw", "drwx------", 0, True, {}),
         "the name is not one tunnelbench gives (tunnelbench.<8 hex digits>.<role>)"),
        (Leftover(GOOD, "lrwxrwxrwx", 0, True, {}), "it is a symbolic link, not a directory"),
        (Leftover(GOOD, "-rw-------", 0, True, {}), "it is not a directory (-rw-------)"),
        (Leftover(GOOD, "drwx------", 1000, False, {}),
         "it belongs to uid 1000, not to the user tunnelbench connects as"),
        (Leftover(GOOD, "drwxrwx---", 0, True, {}), "others may write to it (drwxrwx---)"),
        (Leftover(GOOD, "drwx---rwx", 0, True, {}), "others may write to it (drwx---rwx)"),
        (Leftover(GOOD, "drwxrwxrwt", 0, True, {}), "others may write to it (drwxrwxrwt)"),
    ],
)  # fmt: skip
def test_only_a_private_directory_of_the_connecting_user_with_our_name_is_acted_on(leftover, why):
    assert leftovers.refusal(leftover) == why


def test_the_host_lists_each_directory_with_its_mode_owner_and_record(tmp_path):
    _made(tmp_path, GOOD)
    _made(tmp_path, "tunnelbench.11111111.client", mode=0o770)
    _made(tmp_path, "tunnelbench.22222222.server", uid=NOBODY)
    (tmp_path / "tunnelbench.33333333.gw").symlink_to(tmp_path / GOOD)
    # a name that would forge a second line of the listing, were it printed as it is
    _made(tmp_path, 'tunnelbench.4\ntunnelbench.44444444.gw drwx------ 0 yes {"pid": 2}')
    done = subprocess.run(
        ["busybox", "sh", "-c", leftovers.list_script(str(tmp_path))],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    found = {f.name: f for f in leftovers.parse(done.stdout)}
    assert sorted(found) == [
        GOOD,
        "tunnelbench.11111111.client",
        "tunnelbench.22222222.server",
        "tunnelbench.33333333.gw",
        FORGED,
    ]
    assert found[GOOD] == Leftover(
        GOOD, "drwx------", 0, True, {"boot_id": "x", "pid": 1, "start_time": 0}
    )
    assert {name: leftovers.refusal(f) for name, f in found.items()} == {
        GOOD: None,
        "tunnelbench.11111111.client": "others may write to it (drwxrwx---)",
        "tunnelbench.22222222.server": (
            f"it belongs to uid {NOBODY}, not to the user tunnelbench connects as"
        ),
        "tunnelbench.33333333.gw": "it is a symbolic link, not a directory",
        FORGED: ("the name is not one tunnelbench gives (tunnelbench.<8 hex digits>.<role>)"),
    }


@pytest.mark.parametrize(
    ("mode", "uid", "link", "message"),
    [
        (0o770, 0, False, "is writable by others (drwxrwx---)"),
        (0o703, 0, False, "is writable by others (drwx----wx)"),
        (0o700, NOBODY, False, f"belongs to uid {NOBODY}, not to this user"),
        (0o700, 0, True, "is a symbolic link"),
    ],
)
def test_the_cleanup_script_runs_nothing_from_a_directory_others_could_have_written(
    tmp_path, mode, uid, link, message
):
    """The host checks again just before it runs the undo lines: the directory may have
    changed since it was listed."""
    marker = tmp_path / "ran"
    d = _made(tmp_path, GOOD, mode=mode, uid=uid, marker=marker)
    target = d
    if link:
        target = tmp_path / "tunnelbench.99999999.gw"
        target.symlink_to(d)
    done = subprocess.run(
        ["busybox", "sh", "-c", CLEANUP, "cleanup", str(target)], capture_output=True, text=True
    )
    assert done.returncode == 3
    assert done.stderr == f"refused: {target} {message}\n"
    assert not marker.exists() and d.is_dir()


def test_the_cleanup_script_runs_the_undo_lines_of_a_private_directory(tmp_path):
    marker = tmp_path / "ran"
    d = _made(tmp_path, GOOD, marker=marker)
    done = subprocess.run(
        ["busybox", "sh", "-c", CLEANUP, "cleanup", str(d)], capture_output=True, text=True
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert marker.exists() and not d.exists()
