"""setup.sh waits for a dpkg lock held by another apt process instead of failing (docs/hosting.md §9).

Runs setup.sh's own ``apt_install`` (extracted from the script, not a copy) for an installed
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
