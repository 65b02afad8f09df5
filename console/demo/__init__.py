"""``tianshu-mcp demo``: the main job end to end, as a host would drive it.

Generates a real git repository (a pytest project with a bug, :mod:`.fixture`), registers the
scripted CLI agent (:mod:`.scripted_agent`) as agent ``scripted-demo``, starts ``tianshu-mcp`` over
stdio with the MCP SDK client (exactly what a host does), calls ``run_task`` with automatic rework,
waits with ``wait_task`` and prints the final status, the report and the Prefect UI link
(:mod:`.host`). Everything it needs ships in the package: it runs from an installed wheel (pipx,
uvx) as well as from a clone. Before it writes anything it prints where it writes (:mod:`.places`);
``demo --clean`` removes what it created.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    """Run the demo (exit code 0 when the task succeeded), or with ``--clean`` remove what it
    created (0 when done, 1 when a directory was refused as not the demo's)."""
    import anyio

    from .fixture import make_calc_repo, scripted_profile
    from .host import run
    from .places import DemoPlaces, clean

    parser = argparse.ArgumentParser(prog="tianshu-mcp demo", description=__doc__.splitlines()[0].replace("``", ""))
    parser.add_argument("--home", default=str(Path.home() / ".tianshu-mcp-demo"),
                        help="data home for the demo (default ~/.tianshu-mcp-demo); its projects go to <home>-demo-projects")
    parser.add_argument("--rounds", type=int, default=2, help="automatic rework rounds (default 2)")
    parser.add_argument("--clean", action="store_true",
                        help="stop the demo home's service and remove what the demo created (its home, its projects "
                             "directory, the Prefect database template if a demo run created it), then exit")
    args = parser.parse_args(argv)
    places = DemoPlaces.of(Path(args.home))
    if args.clean:
        lines, code = clean(places)
        print("\n".join(lines))
        return code
    places.check()
    print(places.announcement(), flush=True)
    places.prepare()
    # an installed wheel has no pytest (a test extra): the same tests then run with unittest
    runner = "pytest" if importlib.util.find_spec("pytest") is not None else "unittest"
    repo = make_calc_repo(places.projects / f"calc-{time.strftime('%Y%m%d-%H%M%S')}", runner=runner)
    profiles_path = places.home / "agent-profiles.json"
    data = json.loads(profiles_path.read_text()) if profiles_path.exists() else {"profiles": {}}
    # the agent runs with this interpreter: the one the installed console script runs on
    data.setdefault("profiles", {})["scripted-demo"] = scripted_profile(python=sys.executable)
    profiles_path.write_text(json.dumps(data, indent=2) + "\n")
    print(f"demo project : {repo} (git repo; calc.add has a bug, tests/test_calc.py shows it; checked with {runner})")
    print(f"data home    : {places.home}")
    return anyio.run(run, places.home, repo, args.rounds)
