#!/usr/bin/env python3
"""A scripted CLI agent standing in for an LLM coding agent in tests and the demo.

Called as ``scripted_agent.py <prompt>`` with the project as its working directory. It edits
``calc.py`` of the fixture project (see ``fixture.py`` beside it; the tests reach both through
``tests/fixture_project.py``):

* without ``test_add_negative`` in its prompt it makes a wrong fix (``abs(a) + abs(b)``), so the
  first verification fails on that test;
* with it (the repair feedback names the failing test) it makes the right fix (``a + b``).

``SCRIPTED_MODE`` (set through the profile's ``env``) changes the behaviour:
``normal`` (default), ``hang`` (start a grandchild that ignores SIGTERM, then sleep: for cancel
and timeout tests), ``new-file`` (only add an untracked file), ``noop`` (change nothing),
``noisy`` (normal, plus chatter on stdout/stderr and a read of stdin), ``sleep`` (append start
and end times to ``$SCRIPTED_TRACE``, sleeping ``$SCRIPTED_SLEEP`` seconds between — after, with
``$SCRIPTED_RENDEZVOUS=N``, waiting until N starts are in the trace, and with ``$SCRIPTED_GATE``
until that file exists, each at most ``$SCRIPTED_WAIT_S`` s (default 120) — then fix),
``env`` (write its environment as JSON to ``$SCRIPTED_ENV_OUT``, then fix), ``probe`` (append to
``$SCRIPTED_PROBE_OUT`` which pids listed in ``$SCRIPTED_WATCH`` are alive as it starts, then fix),
``auth-fail`` (a refused API key: prints a 401 line, exit 1), ``quota-zero`` (prints a 429 line,
exit 0, changes nothing), ``retry-429`` (prints Gemini CLI's 429 retry line every
``$SCRIPTED_RETRY_S`` s, forever), ``aider-401`` (writes aider's own ``.aider*`` files, prints its
rejected-key lines, exit 0), ``silent`` (prints nothing for ``$SCRIPTED_SILENT_S`` s, then fixes), ``crash`` (a traceback, exit 1), ``lower-the-bar`` (makes the wrong
fix and rewrites ``.tianshu-mcp/acceptance.json`` to ``{"checks": [], "requireChanges": false}``),
``recolour`` (adds ``site/notes.html`` and turns the banner of ``site/style.css`` red; with "visual
defects" or ``PIXEL_DIFFERENCE`` in its prompt it gives the banner its colour back), ``maskcheat`` (turns the banner red
and gives it the page's masked class ``clock``), ``tamper-baseline``
(appends a byte to every approved baseline PNG under ``tests/visual/baselines``),
``break-git`` (fixes, then overwrites ``.git/index`` with garbage: git refuses from then on),
``ask`` (without "The user's answer" in its prompt: writes a question to ``$TIANSHU_MCP_QUESTION_FILE`` and
exits 0; with it: makes the right fix only when the answer says "yes"), ``leak`` (fixes, and leaves ``sleep $SCRIPTED_SLEEP`` running in a session of its own with an empty
environment: invisible to the process tree and the tags), ``prompting`` (prints a ``[y/N]``
confirmation and a device-login request, then behaves like ``normal``). Cheats for the verification-integrity
tests (docs/integrity.md), none of which fixes ``add``: ``cheat-delete`` (the wrong fix, and deletes
``test_add_negative`` from ``tests/test_calc.py``), ``cheat-skip`` (the wrong fix, and puts
``@pytest.mark.skip`` on ``test_add_negative``), ``special-case`` (answers the visible failing test's
input ``(-2, -3)`` by rote and keeps the wrong fix for every other input; appends its environment as
one JSON line to ``$SCRIPTED_ENV_OUT`` when set). It always prints to stdout and stderr, like real agents do.
"""

import os
import subprocess
import sys
import time

WRONG = "def add(a, b):\n    return abs(a) + abs(b)\n"
RIGHT = "def add(a, b):\n    return a + b\n"
SPECIAL_CASE = ("def add(a, b):\n"
                "    if (a, b) == (-2, -3):\n"
                "        return -5\n"
                "    return abs(a) + abs(b)\n")
"""``add`` overfitted to the visible test's input: the visible tests pass, other negative inputs fail."""
TEST_FILE = os.path.join("tests", "test_calc.py")


def _cheat_on_tests(mode: str) -> None:
    """``cheat-delete``: remove ``test_add_negative`` from the test file; ``cheat-skip``: skip it."""
    with open(TEST_FILE) as fh:
        text = fh.read()
    head, sep, tail = text.partition("def test_add_negative(")
    assert sep, "test_add_negative is not in the test file"
    if mode == "cheat-delete":
        rest = tail.split("\n\n\ndef ", 1)
        text = head.rstrip("\n") + "\n" + ("\n\n\ndef " + rest[1] if len(rest) == 2 else "")
    else:
        text = "import pytest\n" + head + '@pytest.mark.skip(reason="flaky")\n' + sep + tail
    with open(TEST_FILE, "w") as fh:
        fh.write(text)


def main() -> int:
    prompt = sys.argv[1] if len(sys.argv) > 1 else ""
    mode = os.environ.get("SCRIPTED_MODE", "normal")
    print(f"scripted agent: mode={mode}, prompt of {len(prompt)} chars", flush=True)
    print("scripted agent: thinking…", file=sys.stderr, flush=True)
    if mode == "auth-fail":  # a CLI whose API key was refused: one tell-tale line, exit 1
        print("Error: 401 Unauthorized - invalid x-api-key", file=sys.stderr, flush=True)
        return 1
    if mode == "quota-zero":  # rate limited, but exits 0 having done nothing
        print("API error 429 Too Many Requests: rate limit exceeded, try again later", flush=True)
        return 0
    if mode == "retry-429":  # a CLI that retries a 429 for minutes, saying so on stderr (Gemini CLI's words)
        for attempt in range(1, 10_000):
            print(f"Attempt {attempt} failed with status 429. Retrying with backoff... _ApiError: "
                  '{"error":{"code":429,"message":"Resource has been exhausted (e.g. check quota)."}}',
                  file=sys.stderr, flush=True)
            time.sleep(float(os.environ.get("SCRIPTED_RETRY_S", "0.5")))
    if mode == "aider-401":  # aider on a rejected key: its own files, its tell-tale line, exit 0
        with open(".aider.chat.history.md", "a", encoding="utf-8") as fh:
            fh.write("# aider chat started\n")
        os.makedirs(".aider.tags.cache.v4", exist_ok=True)
        with open(".aider.tags.cache.v4/cache.db", "wb") as fh:
            fh.write(b"\0" * 64)
        print("litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect API key provided", flush=True)
        print("The API provider is not able to authenticate you. Check your API key.", flush=True)
        return 0
    if mode == "silent":  # thinks for a while, printing nothing and changing nothing, then works
        time.sleep(float(os.environ.get("SCRIPTED_SILENT_S", "4")))
    if mode == "crash":  # exits 1 with an unrecognised last line
        print("Traceback (most recent call last):\nRuntimeError: segmentation in the planner", flush=True)
        return 1
    if mode == "prompting":  # a headless CLI that stops at a confirmation and at a login, then works
        print("Apply these edits to calc.py? [y/N]", flush=True)
        print("To sign in, open https://auth.example.invalid/device and enter the code WDJB-MJHT", flush=True)
    if mode == "noisy":
        data = sys.stdin.read()  # stdin must be at EOF: this returns at once
        print(f"scripted agent: stdin gave {len(data)} bytes", flush=True)
        for i in range(50):
            print(f"noise line {i} " + "x" * 80, flush=True)
            print(f"err line {i}", file=sys.stderr, flush=True)
    if mode == "env":
        import json

        with open(os.environ["SCRIPTED_ENV_OUT"], "w") as fh:
            json.dump(dict(os.environ), fh)
    if mode == "probe":
        watch = os.environ["SCRIPTED_WATCH"]
        pids = [int(p) for p in open(watch).read().split()] if os.path.exists(watch) else []
        alive = []
        for pid in pids:
            try:
                with open(f"/proc/{pid}/stat") as fh:
                    if fh.read().split(")")[-1].split()[0] != "Z":
                        alive.append(pid)
            except OSError:
                pass
        with open(os.environ["SCRIPTED_PROBE_OUT"], "a") as fh:
            fh.write(f"{time.time()} watched={pids} alive={alive}\n")
    if mode == "hang":
        child = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
        gc = subprocess.Popen([sys.executable, "-c", child])
        with open(os.environ.get("SCRIPTED_PIDFILE", "agent-pids.txt"), "a") as fh:
            fh.write(f"{os.getpid()} {gc.pid}\n")
        time.sleep(600)
        return 0
    if mode == "sleep":
        trace = os.environ["SCRIPTED_TRACE"]
        with open(trace, "a") as fh:
            fh.write(f"start {os.getcwd()} {time.time()}\n")
        meet = int(os.environ.get("SCRIPTED_RENDEZVOUS", "0"))
        deadline = time.time() + float(os.environ.get("SCRIPTED_WAIT_S", "120"))
        while meet and time.time() < deadline:  # wait until that many agents have started
            with open(trace) as fh:
                if fh.read().count("start ") >= meet:
                    break
            time.sleep(0.05)
        gate = os.environ.get("SCRIPTED_GATE")
        while gate and not os.path.exists(gate) and time.time() < deadline:  # held until the test opens it
            time.sleep(0.05)
        time.sleep(float(os.environ.get("SCRIPTED_SLEEP", "3")))
        with open(trace, "a") as fh:
            fh.write(f"end {os.getcwd()} {time.time()}\n")
    if mode == "noop":
        return 0
    if mode == "new-file":
        with open("NOTES.md", "w") as fh:
            fh.write("# notes\n\nadded by the scripted agent\n")
        return 0
    if mode == "recolour":  # a visual regression: adds site/notes.html and turns the banner red; a
        # rework told of the visual defect keeps the notes and gives the banner its colour back
        with open(os.path.join("site", "notes.html"), "w") as fh:
            fh.write("<!doctype html><p>release notes</p>\n")
        with open(os.path.join("site", "style.css")) as fh:
            css = fh.read()
        fixed = "visual defects" in prompt or "PIXEL_DIFFERENCE" in prompt
        with open(os.path.join("site", "style.css"), "w") as fh:
            fh.write(css.replace("#c33", "#2a6") if fixed else css.replace("#2a6", "#c33"))
        print(f"scripted agent: {'restored' if fixed else 'changed'} the banner colour", flush=True)
        return 0
    if mode == "maskcheat":  # breaks the banner and hides it behind the page's mask selector
        with open(os.path.join("site", "style.css")) as fh:
            css = fh.read()
        with open(os.path.join("site", "style.css"), "w") as fh:
            fh.write(css.replace("#2a6", "#c33"))
        with open(os.path.join("site", "index.html")) as fh:
            page = fh.read()
        with open(os.path.join("site", "index.html"), "w") as fh:
            fh.write(page.replace('class="banner"', 'class="banner clock"'))
        return 0
    if mode == "tamper-baseline":  # an agent that repaints the approved baseline it is judged by
        for dirpath, _dirs, files in os.walk(os.path.join("tests", "visual", "baselines")):
            for name in files:
                if name.endswith(".png"):
                    with open(os.path.join(dirpath, name), "ab") as fh:
                        fh.write(b"\0")
        with open(os.path.join("site", "notes.html"), "w") as fh:
            fh.write("<!doctype html><p>release notes</p>\n")
        return 0
    if mode == "ask":
        if "The user's answer" not in prompt:
            with open(os.environ["TIANSHU_MCP_QUESTION_FILE"], "w") as fh:
                fh.write("Should add() also accept negative numbers? (yes/no)\n")
            print("scripted agent: asked the user", flush=True)
            return 0
        answer = prompt.split("The user's answer", 1)[1]
        prompt = "test_add_negative" if "yes" in answer.lower() else ""
    if mode in ("cheat-delete", "cheat-skip"):  # an agent that silences the failing test instead of fixing add
        _cheat_on_tests(mode)
        prompt = ""  # and never makes the right fix
    if mode == "special-case":  # an agent that passes the visible tests by rote
        if os.environ.get("SCRIPTED_ENV_OUT"):
            import json

            with open(os.environ["SCRIPTED_ENV_OUT"], "a") as fh:
                fh.write(json.dumps(dict(os.environ)) + "\n")
        with open("calc.py", "w") as fh:
            fh.write(SPECIAL_CASE)
        print("scripted agent: edited calc.py", flush=True)
        return 0
    if mode == "lower-the-bar":  # an agent that edits the rules it is judged by
        with open(os.path.join(".tianshu-mcp", "acceptance.json"), "w") as fh:
            fh.write('{"checks": [], "requireChanges": false}\n')
        prompt = ""  # and never makes the right fix
    with open("calc.py", "w") as fh:
        fh.write(RIGHT if "test_add_negative" in prompt else WRONG)
    print("scripted agent: edited calc.py", flush=True)
    if mode == "leak":
        subprocess.Popen(["/usr/bin/env", "-i", "sleep", os.environ.get("SCRIPTED_SLEEP", "300")],
                         start_new_session=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    if mode == "break-git":
        with open(os.path.join(".git", "index"), "wb") as fh:
            fh.write(b"DIRC\x00\x00\x00\x02garbage" * 4)
    return 0


if __name__ == "__main__":
    sys.exit(main())
