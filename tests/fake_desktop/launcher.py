#!/usr/bin/env python3
"""The fake desktop agent app's executable: what a profile's ``command`` starts.

A fake for a vendor's desktop app (see :mod:`server`): ``launcher.py
--remote-debugging-port=<port> --user-data-dir=<dir> [args…]`` starts the app's backend
(:mod:`server`, a child of this process), then *becomes* the app: it execs Chromium on the page
with the same debugging port and user-data-dir, so the process the driver launched is the one
whose command line carries them, as with a real Electron app.

Chromium is ``$FAKE_DESKTOP_CHROMIUM`` or ``/usr/bin/chromium``, run headless
(``--headless=new --disable-gpu``, ``--no-sandbox`` as root, no first-run UI, no background
networking, no component updates, no sync).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
CHROMIUM_FLAGS = ["--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-features=Translate,MediaRouter", "--window-size=1200,900"]


def main(argv: list[str]) -> int:
    if not any(a.startswith("--remote-debugging-port") for a in argv):
        print("launcher: --remote-debugging-port=<port> is required", file=sys.stderr)
        return 2
    if not any(a.startswith("--user-data-dir=") for a in argv):
        print("launcher: --user-data-dir=<dir> is required", file=sys.stderr)
        return 2
    backend = subprocess.Popen([sys.executable, str(HERE / "server.py"), "--parent-pid", str(os.getpid())],
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert backend.stdout is not None
    line = backend.stdout.readline().decode().strip()
    if not line.startswith("PORT "):
        print(f"launcher: the backend did not start ({line!r})", file=sys.stderr)
        return 1
    port = int(line.split()[1])
    chromium = os.environ.get("FAKE_DESKTOP_CHROMIUM", "/usr/bin/chromium")
    flags = list(CHROMIUM_FLAGS) + (["--no-sandbox"] if os.geteuid() == 0 else [])
    url = f"http://127.0.0.1:{port}/fake-desktop-app"
    sys.stdout.flush()
    os.execv(chromium, [chromium, *flags, *argv, url])
    return 1  # pragma: no cover - execv does not return


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
