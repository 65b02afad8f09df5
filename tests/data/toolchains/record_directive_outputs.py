#!/usr/bin/env python3
"""Record the real tool outputs that the repair-directive parsers are tested against.

Each case writes a tiny broken project into ``<root>/<tool>-<case>/`` (default root
``/tmp/tianshu-outputs``, so the absolute paths inside the recorded outputs are stable across
re-recordings), runs the real tool there with stdout and stderr merged (as the acceptance runner
does) and stores ``<tool>-<case>.txt`` in its toolchain's folder next to this script
(``<toolchain id>/<tool>-<case>.txt``, see :attr:`Case.path`; ``git-diff-check/`` for git, and a
``-directives`` suffix where a counting recording of ``record_runner_outputs.py`` has the same name):
four header lines, then the raw output::

    # tool: ruff 0.17.6
    # cmd: ruff check --isolated --no-cache --output-format concise .
    # project: /tmp/tianshu-outputs/ruff-concise
    # exit: 1

The parsers must ignore these header lines. ``tests/test_acceptance_directives.py`` imports this
module too: its live tests build the same projects in a temp dir and parse what the tools print now.

Usage (from the repository root)::

    .venv/bin/python tests/data/toolchains/record_directive_outputs.py            # every case
    .venv/bin/python tests/data/toolchains/record_directive_outputs.py ruff go    # only these tools
    .venv/bin/python tests/data/toolchains/record_directive_outputs.py --root /tmp/elsewhere

Tools: ruff, mypy and pytest from the running interpreter's bin dir (the project venv); tsc,
eslint, jest and vitest from ``tests/toolchains/node_modules/.bin``; ``go`` and ``cargo`` from PATH
(or ``/usr/local/go/bin``, ``~/.cargo/bin``). Nothing is downloaded.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
NODE_BIN = REPO / "tests" / "toolchains" / "node_modules" / ".bin"
PY_BIN = Path(sys.executable).parent
DEFAULT_ROOT = Path("/tmp/tianshu-outputs")
HEADER_FIRST = "# tool: "  # the first line of every recording of this script
DIRECTIVES_SUFFIX = "-directives"

# ESLint 8's built-in `unix` and `compact` formatters (MIT, eslint/eslint lib/cli-engine/formatters),
# which ESLint 9 removed from core; passed with `--format <file>` so the real ESLint prints them.
UNIX_FORMATTER = """\
"use strict";
function getMessageType(message) {
    if (message.fatal || message.severity === 2) { return "Error"; }
    return "Warning";
}
module.exports = function(results) {
    let output = "", total = 0;
    results.forEach(result => {
        const messages = result.messages;
        total += messages.length;
        messages.forEach(message => {
            output += `${result.filePath}:`;
            output += `${message.line || 0}:`;
            output += `${message.column || 0}:`;
            output += ` ${message.message} `;
            output += `[${getMessageType(message)}${message.ruleId ? `/${message.ruleId}` : ""}]`;
            output += "\\n";
        });
    });
    if (total > 0) { output += `\\n${total} problem${total !== 1 ? "s" : ""}`; }
    return output;
};
"""
COMPACT_FORMATTER = """\
"use strict";
function getMessageType(message) {
    if (message.fatal || message.severity === 2) { return "Error"; }
    return "Warning";
}
module.exports = function(results) {
    let output = "", total = 0;
    results.forEach(result => {
        const messages = result.messages;
        total += messages.length;
        messages.forEach(message => {
            output += `${result.filePath}: `;
            output += `line ${message.line || 0}`;
            output += `, col ${message.column || 0}`;
            output += `, ${getMessageType(message)}`;
            output += ` - ${message.message}`;
            output += message.ruleId ? ` (${message.ruleId})` : "";
            output += "\\n";
        });
    });
    if (total > 0) { output += `\\n${total} problem${total !== 1 ? "s" : ""}`; }
    return output;
};
"""

# --- the broken projects ---------------------------------------------------------------------

TS_PROJECT = {
    "tsconfig.json": '{\n  "compilerOptions": {"strict": true, "noEmit": true, "target": "es2020"},\n'
    '  "include": ["src"]\n}\n',
    "src/a.ts": (
        'const n: number = "x";\n'
        "export function f(s: string): number {\n"
        "  return s.foo;\n"
        "}\n"
        "console.log(missing, n);\n"
    ),
    "src/util/b.ts": "export function g(x) {\n  return x;\n}\n",
}

ESLINT_PROJECT = {
    "package.json": '{\n  "name": "lintme",\n  "version": "1.0.0",\n  "private": true,\n  "type": "module",\n'
    '  "scripts": {"lint": "eslint ."}\n}\n',
    "eslint.config.js": (
        "export default [\n"
        "  {\n"
        '    files: ["**/*.js"],\n'
        '    languageOptions: { ecmaVersion: 2022, sourceType: "module", globals: { console: "readonly" } },\n'
        "    rules: {\n"
        '      "no-unused-vars": "error",\n'
        '      "no-undef": "error",\n'
        '      "prefer-const": "error",\n'
        '      eqeqeq: "warn",\n'
        "    },\n"
        "  },\n"
        "];\n"
    ),
    "src/app.js": (
        'import fs from "fs";\n'
        "let total = 0;\n"
        "export function check(a) {\n"
        "  if (a == null) return missing;\n"
        "  return total;\n"
        "}\n"
    ),
    "src/broken.js": "export const = 1;\n",
}

RUFF_PROJECT = {
    "pkg/__init__.py": "",
    "pkg/mod.py": (
        "import os\n"
        "import sys\n"
        "\n"
        "\n"
        "def f(x):\n"
        "    if x == None:\n"
        "        return undefined_name\n"
        "    y = 1\n"
        "    return sys.argv\n"
    ),
}

MYPY_PROJECT = {
    "app/__init__.py": "",
    "app/m.py": (
        "from typing import Optional\n"
        "\n"
        "\n"
        "def add(a: int, b: int) -> int:\n"
        "    return a + b\n"
        "\n"
        "\n"
        'x: int = "s"\n'
        'add(1, "2")\n'
        "\n"
        "\n"
        "def g(v: Optional[str]) -> int:\n"
        "    return v.upper()\n"
        "\n"
        "\n"
        "undefined_fn()\n"
    ),
}

PYTEST_PROJECT = {
    "pytest.ini": "[pytest]\ntestpaths = tests\n",
    "conftest.py": "",
    "calc.py": "def add(a, b):\n    return a - b\n\n\ndef div(a, b):\n    return a / b\n",
    "tests/__init__.py": "",
    "tests/test_calc.py": (
        "from calc import add, div\n"
        "\n"
        "\n"
        "def test_add():\n"
        '    assert add(2, 2) == 4, "add is wrong"\n'
        "\n"
        "\n"
        "def test_div():\n"
        "    assert div(1, 0) == 0\n"
        "\n"
        "\n"
        "class TestThing:\n"
        "    def test_method(self):\n"
        "        assert [1, 2] == [1, 3]\n"
        "\n"
        "\n"
        "def test_ok():\n"
        "    assert True\n"
    ),
}
PYTEST_COLLECT_ERROR = {
    "pytest.ini": "[pytest]\ntestpaths = tests\n",
    "conftest.py": "",
    "tests/__init__.py": "",
    "tests/test_ok.py": "def test_ok():\n    assert True\n",
    "tests/test_broken.py": "import nonexistent_module_xyz\n\n\ndef test_never():\n    assert nonexistent_module_xyz\n",
}

JEST_PROJECT = {
    "package.json": '{\n  "name": "jestme",\n  "private": true\n}\n',
    "sum.js": "module.exports = (a, b) => a - b;\n",
    "sum.test.js": (
        "const sum = require('./sum');\n"
        "\n"
        "describe('math', () => {\n"
        "  test('adds numbers', () => {\n"
        "    expect(sum(2, 2)).toBe(4);\n"
        "  });\n"
        "  test('passes', () => {\n"
        "    expect(1).toBe(1);\n"
        "  });\n"
        "});\n"
        "\n"
        "test('top level throws', () => {\n"
        "  throw new Error('boom');\n"
        "});\n"
    ),
    "broken.test.js": "const nope = require('./nope');\n\ntest('never', () => {\n  expect(nope).toBe(1);\n});\n",
}

VITEST_PROJECT = {
    "package.json": '{\n  "name": "vitestme",\n  "private": true,\n  "type": "module"\n}\n',
    "src/sum.js": "export const sum = (a, b) => a - b;\n",
    "src/sum.test.js": (
        "import { sum } from './sum.js';\n"
        "\n"
        "describe('math', () => {\n"
        "  test('adds numbers', () => {\n"
        "    expect(sum(2, 2)).toBe(4);\n"
        "  });\n"
        "  test('passes', () => {\n"
        "    expect(1).toBe(1);\n"
        "  });\n"
        "});\n"
        "\n"
        "test('top level throws', () => {\n"
        "  throw new Error('boom');\n"
        "});\n"
    ),
}

GO_MOD = {"go.mod": "module x\n\ngo 1.19\n"}
GO_BUILD = {
    **GO_MOD,
    "main.go": 'package main\n\nimport "os"\n\nfunc main() {\n\tfmt.Println(foo)\n}\n',
    "pkg/calc/calc.go": "package calc\n\nfunc Add(a, b int) int {\n\treturn a + c\n}\n",
}
GO_VET = {
    **GO_MOD,
    "main.go": 'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Printf("%d\\n", "s")\n}\n',
}
GO_TEST = {
    **GO_MOD,
    "calc/calc.go": "package calc\n\nfunc Add(a, b int) int {\n\treturn a - b\n}\n",
    "calc/calc_test.go": (
        "package calc\n\n"
        'import "testing"\n\n'
        "func TestAdd(t *testing.T) {\n"
        "\tif got := Add(2, 2); got != 4 {\n"
        '\t\tt.Errorf("Add(2, 2) = %d, want 4", got)\n'
        "\t}\n"
        "}\n\n"
        "func TestOK(t *testing.T) {}\n"
    ),
    "idx/idx.go": "package idx\n\nfunc At(s []int, i int) int {\n\treturn s[i]\n}\n",
    "idx/idx_test.go": (
        "package idx\n\n"
        'import "testing"\n\n'
        "func TestAt(t *testing.T) {\n"
        "\tif At([]int{1}, 3) != 1 {\n"
        '\t\tt.Fatal("unreachable")\n'
        "\t}\n"
        "}\n"
    ),
    "broken/broken.go": "package broken\n\nfunc B() int { return 1 }\n",
    "broken/broken_test.go": (
        "package broken\n\n" 'import "testing"\n\n' "func TestB(t *testing.T) {\n\t_ = nope\n}\n"
    ),
}

CARGO_TOML = '[package]\nname = "x"\nversion = "0.1.0"\nedition = "2021"\n\n[dependencies]\n'
CARGO_BUILD = {
    "Cargo.toml": CARGO_TOML,
    "src/main.rs": (
        "fn helper() -> i32 {\n"
        "    let unused = 5;\n"
        "    1\n"
        "}\n"
        "\n"
        "fn main() {\n"
        "    let s: String = 1;\n"
        '    println!("{} {} {}", s, helper(), foo);\n'
        "}\n"
    ),
}
CARGO_CLIPPY = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": "pub fn inc(x: i32) -> i32 {\n    return x + 1;\n}\n",
}
CARGO_RUN = {
    "Cargo.toml": CARGO_TOML,
    "src/main.rs": "fn main() {\n    let v: Vec<i32> = std::env::args().map(|a| a.len() as i32).collect();\n"
    "    println!(\"{}\", v[3]);\n}\n",
}
CARGO_TEST = {
    "Cargo.toml": CARGO_TOML,
    "src/lib.rs": (
        "pub fn add(a: i32, b: i32) -> i32 {\n"
        "    a - b\n"
        "}\n"
        "\n"
        "#[cfg(test)]\n"
        "mod tests {\n"
        "    use super::*;\n"
        "\n"
        "    #[test]\n"
        "    fn it_works() {\n"
        "        assert_eq!(add(2, 2), 4);\n"
        "    }\n"
        "\n"
        "    #[test]\n"
        "    fn it_panics() {\n"
        '        panic!("boom {}", 1);\n'
        "    }\n"
        "\n"
        "    #[test]\n"
        "    fn ok() {}\n"
        "}\n"
    ),
}


@dataclass
class Case:
    """One recorded output: ``<toolchain>/<tool>-<name><suffix>.txt``."""

    tool: str
    name: str
    files: dict[str, str]
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    git: bool = False  # init a repo, commit `files`, then apply `after`
    after: dict[str, str] = field(default_factory=dict)
    suffix: str = ""  # DIRECTIVES_SUFFIX where record_runner_outputs.py records a file of the same name

    @property
    def id(self) -> str:
        return f"{self.tool}-{self.name}"

    @property
    def toolchain(self) -> str:
        """The toolchain id whose folder holds the recording (``git-diff-check`` for git)."""
        return "git-diff-check" if self.tool == "git" else self.tool

    @property
    def path(self) -> Path:
        """Where the recording lives: ``tests/data/toolchains/<toolchain>/<id><suffix>.txt``."""
        return HERE / self.toolchain / f"{self.id}{self.suffix}.txt"


def _fmt(name: str) -> str:
    return f"{{FORMATTERS}}/{name}"


CASES: list[Case] = [
    Case("tsc", "plain", TS_PROJECT, ["tsc", "--noEmit", "--pretty", "false", "-p", "."]),
    Case("tsc", "pretty", TS_PROJECT, ["tsc", "--noEmit", "--pretty", "true", "-p", "."]),
    Case("eslint", "stylish", ESLINT_PROJECT, ["eslint", "."]),
    Case("eslint", "color", ESLINT_PROJECT, ["eslint", "--color", "."]),
    Case("eslint", "unix", ESLINT_PROJECT, ["eslint", "--format", _fmt("unix.cjs"), "."]),
    Case("eslint", "compact", ESLINT_PROJECT, ["eslint", "--format", _fmt("compact.cjs"), "."]),
    Case("eslint", "npm-run-lint", ESLINT_PROJECT, ["npm", "run", "lint"]),
    Case("ruff", "concise", RUFF_PROJECT, ["ruff", "check", "--isolated", "--no-cache", "--output-format", "concise", "."]),
    Case("ruff", "full", RUFF_PROJECT, ["ruff", "check", "--isolated", "--no-cache", "--output-format", "full", "."]),
    Case("ruff", "color", RUFF_PROJECT, ["ruff", "check", "--isolated", "--no-cache", "."], env={"CLICOLOR_FORCE": "1"}),
    Case("mypy", "default", MYPY_PROJECT, ["mypy", "--cache-dir", "{CACHE}/mypy", "app"]),
    Case("mypy", "columns", MYPY_PROJECT, ["mypy", "--cache-dir", "{CACHE}/mypy", "--show-column-numbers", "app"]),
    Case("pytest", "long", PYTEST_PROJECT, ["pytest", "-q", "-p", "no:cacheprovider"]),
    Case("pytest", "short", PYTEST_PROJECT, ["pytest", "-q", "-p", "no:cacheprovider", "--tb=short"]),
    Case("pytest", "line", PYTEST_PROJECT, ["pytest", "-q", "-p", "no:cacheprovider", "--tb=line"]),
    Case("pytest", "color", PYTEST_PROJECT, ["pytest", "-q", "-p", "no:cacheprovider", "--color=yes"]),
    Case("pytest", "collect-error", PYTEST_COLLECT_ERROR, ["pytest", "-q", "-p", "no:cacheprovider"],
         suffix=DIRECTIVES_SUFFIX),
    Case("jest", "fail", JEST_PROJECT, ["jest", "--ci"], suffix=DIRECTIVES_SUFFIX),
    Case("vitest", "fail", VITEST_PROJECT, ["vitest", "run", "--globals"], suffix=DIRECTIVES_SUFFIX),
    Case("vitest", "color", VITEST_PROJECT, ["vitest", "run", "--globals"], env={"FORCE_COLOR": "1"}),
    Case("go", "build", GO_BUILD, ["go", "build", "./..."]),
    Case("go", "vet", GO_VET, ["go", "vet", "./..."]),
    Case("go", "test", GO_TEST, ["go", "test", "./..."]),
    Case("cargo", "build", CARGO_BUILD, ["cargo", "build", "--offline"]),
    Case("cargo", "color", CARGO_BUILD, ["cargo", "build", "--offline", "--color", "always"]),
    Case("cargo", "clippy", CARGO_CLIPPY, ["cargo", "clippy", "--offline", "--", "-D", "warnings"]),
    Case("cargo", "test", CARGO_TEST, ["cargo", "test", "--offline"]),
    Case("cargo", "run-panic", CARGO_RUN, ["cargo", "run", "--offline", "--quiet"]),
    Case(
        "git",
        "diff-check",
        {"notes.txt": "one\ntwo\n"},
        ["git", "diff", "--check"],
        git=True,
        after={"notes.txt": "one  \n<<<<<<< HEAD\ntwo\n"},
    ),
]


def tool_path() -> str:
    """PATH for the tools: the venv's bin, the pinned node tools, go and cargo, then the current PATH."""
    extra = [str(PY_BIN), str(NODE_BIN), "/usr/local/go/bin", str(Path.home() / ".cargo" / "bin")]
    return os.pathsep.join([*extra, os.environ.get("PATH", "")])


def which(tool: str) -> str | None:
    """The executable that runs ``tool`` (the case's ``argv[0]``), or None when it is not installed."""
    return shutil.which(tool, path=tool_path())


_VERSION_ARGV = {
    "tsc": ["tsc", "--version"],
    "eslint": ["eslint", "--version"],
    "ruff": ["ruff", "--version"],
    "mypy": ["mypy", "--version"],
    "pytest": ["pytest", "--version"],
    "jest": ["jest", "--version"],
    "vitest": ["vitest", "--version"],
    "go": ["go", "version"],
    "cargo": ["cargo", "--version"],
    "git": ["git", "--version"],
}


def tool_version(tool: str) -> str:
    """``<tool> <version>`` for the header line, e.g. ``ruff 0.17.6``."""
    try:
        out = subprocess.run(
            _VERSION_ARGV[tool], capture_output=True, text=True, env=_env({}), stdin=subprocess.DEVNULL, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired):
        return f"{tool} (not installed)"
    text = (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
    for prefix in ("Version ", "vitest/", "go version go", "git version ", "cargo ", "ruff ", "mypy ", "pytest ", "v"):
        if text.startswith(prefix):
            text = text[len(prefix):]
            break
    text = text.split(" linux-")[0].split(" (compiled")[0]
    return f"{tool} {text}"


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTEST_", "FORCE_COLOR", "NO_COLOR", "CLICOLOR", "npm_", "VITEST", "JEST_"))
        and k not in ("CI", "TERM", "COLORTERM", "RUST_BACKTRACE", "GOFLAGS")
    }
    env["PATH"] = tool_path()
    env["NO_UPDATE_NOTIFIER"] = "1"
    env["GOFLAGS"] = "-mod=mod"
    env["GOPROXY"] = "off"
    env["GOTOOLCHAIN"] = "local"
    env["CARGO_NET_OFFLINE"] = "true"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env.update(extra)
    return env


def build(case: Case, project: Path) -> None:
    """Write the case's project into ``project`` (which must not exist yet)."""
    project.mkdir(parents=True)
    for rel, text in case.files.items():
        p = project / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    if case.git:
        def g(*args: str) -> None:
            subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True, stdin=subprocess.DEVNULL)

        g("init", "-q")
        g("-c", "user.name=t", "-c", "user.email=t@example.com", "add", "-A")
        g("-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false", "commit", "-qm", "base")
        for rel, text in case.after.items():
            (project / rel).write_text(text)


def argv_for(case: Case, project: Path, formatters: Path, cache: Path) -> list[str]:
    """The case's argv with its placeholders filled in."""
    return [a.replace("{FORMATTERS}", str(formatters)).replace("{CACHE}", str(cache)) for a in case.argv]


def run(case: Case, project: Path, formatters: Path | None = None, cache: Path | None = None, timeout: float = 240) -> tuple[int, str, list[str]]:
    """Run the case's tool in ``project`` with stdout and stderr merged.

    Returns:
        ``(exit code, output, argv)``. ``formatters``/``cache`` default to siblings of the project.
    """
    formatters = formatters or project.parent / "_formatters"
    cache = cache or project.parent / "_cache"
    formatters.mkdir(parents=True, exist_ok=True)
    (formatters / "unix.cjs").write_text(UNIX_FORMATTER)
    (formatters / "compact.cjs").write_text(COMPACT_FORMATTER)
    argv = argv_for(case, project, formatters, cache)
    proc = subprocess.run(
        argv,
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=_env(case.env),
        timeout=timeout,
    )
    return proc.returncode, proc.stdout.decode("utf-8", "replace"), argv


def record(case: Case, root: Path, out_dir: Path = HERE) -> Path:
    """Build, run and store one case in ``out_dir/<toolchain>/``; returns the written file."""
    project = root / case.id
    if project.exists():
        shutil.rmtree(project)
    build(case, project)
    code, output, argv = run(case, project, root / "_formatters", root / "_cache")
    header = (
        f"# tool: {tool_version(case.tool)}\n"
        f"# cmd: {' '.join(argv)}\n"
        f"# project: {project}\n"
        f"# exit: {code}\n"
    )
    path = out_dir / case.path.relative_to(HERE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(header + output)
    return path


def recorded(case_id: str) -> Path:
    """Path of the recording of the case ``case_id`` (``ruff-concise``) in its toolchain folder.

    Raises:
        KeyError: no case has that id.
    """
    return {c.id: c.path for c in CASES}[case_id]


def case_id_of(path: Path) -> str:
    """The case id a recording's file name stands for (its stem without :data:`DIRECTIVES_SUFFIX`)."""
    return path.stem.removesuffix(DIRECTIVES_SUFFIX)


def recordings() -> list[Path]:
    """Every file in the toolchain folders that this script recorded (its first line starts with
    :data:`HEADER_FIRST`), whether or not a case still produces it; sorted."""
    found = []
    for path in sorted(HERE.glob("*/*.txt")):
        with path.open(encoding="utf-8", errors="replace") as f:
            if f.readline().startswith(HEADER_FIRST):
                found.append(path)
    return found


def read_recorded(path: Path) -> tuple[dict[str, str], str]:
    """Split a recorded file into its header fields and the whole text (header included)."""
    text = path.read_text()
    header: dict[str, str] = {}
    for line in text.splitlines()[:4]:
        if line.startswith("# ") and ": " in line:
            k, v = line[2:].split(": ", 1)
            header[k] = v
    return header, text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tools", nargs="*", help="only these tools (default: all)")
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="where the projects are built")
    args = ap.parse_args(argv)
    for case in CASES:
        if args.tools and case.tool not in args.tools:
            continue
        if not which(case.argv[0]):
            print(f"skip {case.id}: {case.argv[0]} not found", file=sys.stderr)
            continue
        path = record(case, args.root)
        print(f"wrote {path.relative_to(REPO)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
