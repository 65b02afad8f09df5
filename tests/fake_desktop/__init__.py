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
