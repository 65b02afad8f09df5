"""A faithful fake of a vendor's desktop coding agent app, for the CDP driver's tests.

Real desktop agents (Codex desktop, ZCode, TraeWork, Kimi Code, Qoder, Open Design, MiniMax
Code) are Windows/macOS Electron apps that cannot run on this Linux machine; this package is a
stand-in with the same surface: an executable (:mod:`.launcher`) that takes
``--remote-debugging-port`` and ``--user-data-dir``, a chat page with a composer, send/stop
buttons, a project picker, a model menu, a login screen and confirmation cards, and a scripted
model that really edits the bound project (:mod:`.server`, ``page.html``).
"""

from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent / "launcher.py"
"""Path of the fake app's launcher script (run it with the test interpreter)."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def gui_profile(udd: Path, port: int, mode: str = "normal", auto: bool = False, run_ms: int = 1200,
                **gui: object) -> dict:
    """An ``agent-profiles.json`` entry for the fake desktop app, launched exactly as a real
    app: ``command`` is the interpreter, ``gui.exeArgs`` the launcher and the debugging port.

    Args:
        udd: the app's dedicated user-data-dir (``gui.userDataDir``).
        port: ``gui.cdpPort``; ``auto``: ``gui.cdpPortAuto`` (range 3).
        mode: ``FAKE_DESKTOP_MODE`` flags (see :mod:`.server`); ``run_ms``: the model's run time.
        gui: more ``gui`` keys. Timings are short for tests: poll 100 ms, 3 stable rounds,
            progress notes every 300 ms. The idle window (no running signal, no reply) is 120 s:
            on a loaded machine the app took over 30 s to show its running signal, so a test
            that is not about the idle timeout must never race it; one that is (mode ``drift``,
            whose selectors match nothing, so nothing can race) sets a short one itself.
    """
    import sys

    return {
        "displayName": "Fake Desktop",
        "driver": "gui",
        "command": sys.executable,
        "env": {"FAKE_DESKTOP_MODE": mode, "FAKE_DESKTOP_RUN_MS": str(run_ms)},
        "gui": {
            "exeArgs": [str(LAUNCHER), "--remote-debugging-port=<port>"],
            "cdpPort": port, "cdpPortAuto": auto, "cdpPortRange": 3,
            "userDataDir": str(udd), "pageUrlPattern": "/fake-desktop-app$",
            "launchTimeoutMs": 120000, "pollIntervalMs": 100, "stableRounds": 3, "idleTimeoutMs": 120000,
            "stallTimeoutMs": 60000, "cancelWaitMs": 8000, "cdpSendTimeoutMs": 10000, "progressIntervalMs": 300,
            "model": "fake-model-large", **gui,
        },
    }


def app_pids(udd: Path) -> list[int]:
    """Pids of every process started with ``--user-data-dir=<udd>`` (the fake app's Chromium)."""
    import psutil

    out = []
    for p in psutil.process_iter(["cmdline"]):
        try:
            if f"--user-data-dir={udd}" in (p.info["cmdline"] or []):
                out.append(p.pid)
        except psutil.Error:
            pass
    return out
