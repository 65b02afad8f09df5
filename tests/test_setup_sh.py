"""setup.sh: what it plans to install, and waiting for a held dpkg lock (docs/hosting.md §9).

The plan: the real script with ``--dry-run`` (prints the plan, installs nothing) under a PATH
holding only the few commands it uses, so every toolchain counts as missing: by default it plans
only what the server needs, ``--test-toolchains`` adds the suite's toolchains.

The lock: setup.sh's own ``apt_install`` (extracted from the script, not a copy) for an installed
package while this test holds ``/var/lib/dpkg/lock-frontend`` the way apt does (fcntl), so apt
touches nothing and needs no network."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest

SETUP = Path(__file__).resolve().parent.parent / "setup.sh"
LOCK = Path("/var/lib/dpkg/lock-frontend")
TOOLCHAIN_PACKAGES = {"golang", "nodejs", "npm", "postgresql", "fonts-wqy-zenhei", "fonts-dejavu-core", "ruby",
                      "ruby-minitest", "rake", "ruby-rspec", "php-cli", "phpunit", "elixir", "cmake", "gcc",
                      "libc6-dev", "maven"}
"""What only the test suite needs (``--test-toolchains``)."""
ABSENT_BY_COMMAND = {"golang", "nodejs", "npm", "fonts-wqy-zenhei", "ruby", "ruby-rspec", "php-cli", "phpunit",
                     "elixir", "cmake", "gcc", "maven"}
"""The toolchain packages setup.sh finds missing by command (the others by file, which this machine may have)."""


def dry_run(tmp_path: Path, *args: str) -> tuple[str, set[str]]:
    """Run the real setup.sh with ``--dry-run`` and a PATH of only the commands it uses; returns its
    stderr and the optional apt packages of its plan."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("dirname", "sed", "id", "ls", "grep", "python3"):
        found = shutil.which(name)
        assert found, name
        if not (bin_dir / name).exists():
            (bin_dir / name).symlink_to(found)
    done = subprocess.run(["/bin/bash", str(SETUP), "--dry-run", *args], capture_output=True, text=True, timeout=60,
                          env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    line = next(ln for ln in done.stderr.splitlines() if "optional apt packages:" in ln)
    return done.stderr, set(line.split(":", 2)[2].split()) - {"(none", "missing)"}


def test_the_default_plan_is_the_server_only_and_test_toolchains_add_the_rest(tmp_path: Path) -> None:
    default, planned = dry_run(tmp_path)
    assert not planned & TOOLCHAIN_PACKAGES, planned  # chromium at most
    assert planned <= {"chromium"}, planned
    assert "git" in default.split("required apt packages:")[1].splitlines()[0]  # git is missing from this PATH
    assert "--dry-run: nothing installed" in default and "pip install -e .)" in default
    full, planned = dry_run(tmp_path, "--test-toolchains")
    assert ABSENT_BY_COMMAND <= planned <= TOOLCHAIN_PACKAGES | {"chromium"}, planned
    assert "pip install -e .[test]" in full and "npm: the test toolchains" in full


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("apt-get") or not LOCK.exists(),
                    reason="needs root and apt")
def test_apt_install_waits_for_a_held_dpkg_lock() -> None:
    held_s = 3.0
    with open(LOCK, "w") as fh:
        fcntl.lockf(fh, fcntl.LOCK_EX)
        threading.Timer(held_s, lambda: fcntl.lockf(fh, fcntl.LOCK_UN)).start()
        t0 = time.monotonic()
        script = (f'eval "$(sed -n \'/^APT_WAIT=/,/^}}/p\' {SETUP})"; apt_install git')
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})
        waited = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert waited >= held_s - 0.5  # it waited for the lock instead of failing at once
