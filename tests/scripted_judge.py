#!/usr/bin/env python3
"""A scripted content judge for the visual content tests (docs/visual.md §6): the stand-in for a
user's LLM command, which cannot exist here. Standard library only; steered by its arguments.

Output (stdout, last line is the verdict unless told otherwise):
  --verdict JSON     the verdict line; repeat it to vary verdicts per run: run n (counted in
                     --counter) prints the n-th one (cycling)
  --raw TEXT         print TEXT as the last stdout line instead of a verdict (garbage)
  --noise N          print N bytes of noise lines on stdout before the verdict
  --stderr TEXT      write TEXT to stderr
  --stderr-pad N     write N "e" characters to stderr before --stderr's text
  --exit CODE        exit with CODE after printing
  --fail-on N        on run N (0-based, see --counter) write "boom N" to stderr and exit 3
  --hang             spawn a grandchild that sleeps, write "<pid> <grandchild pid>" to --pids,
                     then sleep (until killed)
  --hang-on N        hang only on run N
  --flood            write endless stdout (until killed)
State and inspection:
  --counter FILE     count runs in FILE (an integer, incremented at every start)
  --seen FILE        append one JSON line per run: argv, cwd, stdin text, own process group,
                     selected env vars and, for every --file LABEL=PATH, whether PATH exists
                     and its text
  --file LABEL=PATH  a file to report in --seen (PATH is usually a placeholder)
  --env NAME         an environment variable to report in --seen
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time


def bump(counter: str | None) -> int:
    """Increment the counter file; return the run's 0-based index."""
    if not counter:
        return 0
    try:
        with open(counter, encoding="utf-8") as fh:
            n = int(fh.read().strip() or 0)
    except FileNotFoundError:
        n = 0
    tmp = f"{counter}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(str(n + 1))
    os.replace(tmp, counter)
    return n


def inspect(args: argparse.Namespace, run: int) -> None:
    files = {}
    for spec in args.file:
        label, _, path = spec.partition("=")
        entry = {"token": spec, "path": path, "exists": os.path.isfile(path)}
        if entry["exists"]:
            with open(path, encoding="utf-8", errors="replace") as fh:
                entry["text"] = fh.read()
        files[label] = entry
    record = {
        "run": run, "argv": sys.argv[1:], "cwd": os.getcwd(), "stdin": sys.stdin.read(),
        "ownGroup": os.getpgid(0) == os.getpid(), "env": {name: os.environ.get(name) for name in args.env},
        "files": files,
    }
    with open(args.seen, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(record) + "\n")


def hang(pids: str | None) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    if pids:
        tmp = f"{pids}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()} {child.pid}")
        os.replace(tmp, pids)
    while True:
        time.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--verdict", action="append", default=[])
    parser.add_argument("--raw")
    parser.add_argument("--noise", type=int, default=0)
    parser.add_argument("--stderr")
    parser.add_argument("--stderr-pad", type=int, default=0)
    parser.add_argument("--exit", type=int, default=0)
    parser.add_argument("--fail-on", type=int)
    parser.add_argument("--hang", action="store_true")
    parser.add_argument("--hang-on", type=int)
    parser.add_argument("--flood", action="store_true")
    parser.add_argument("--pids")
    parser.add_argument("--counter")
    parser.add_argument("--seen")
    parser.add_argument("--file", action="append", default=[])
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args()

    run = bump(args.counter)
    if args.seen:
        inspect(args, run)
    if args.hang or (args.hang_on is not None and args.hang_on == run):
        hang(args.pids)
    if args.flood:
        chunk = "x" * 65535 + "\n"
        while True:
            sys.stdout.write(chunk)
    if args.fail_on is not None and args.fail_on == run:
        sys.stderr.write(f"boom {run}\n")
        return 3
    if args.noise:
        line = "n" * 99 + "\n"
        sys.stdout.write(line * (args.noise // 100))
    if args.stderr_pad:
        sys.stderr.write("e" * args.stderr_pad)
    if args.stderr:
        sys.stderr.write(args.stderr)
    if args.raw is not None:
        print(args.raw)
    elif args.verdict:
        print(args.verdict[run % len(args.verdict)])
    sys.stdout.flush()
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
