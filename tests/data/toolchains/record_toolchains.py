"""Record the real console output of the toolchains added by issue 13 (must-show 4).

Every ``<toolchain>/<case>.txt`` written here is the merged stdout+stderr (no TTY) of one runner on
a tiny project built in a temporary directory; the temporary path is replaced by ``/tmp/proj`` and
nothing else is edited. The first line is a header the parsers must ignore::

    #% recorded by record_toolchains.py; tool: <tool and version>; argv: <argv>; exit: <exit code>

Toolchains: Maven (offline, ``mvn -o``: the plugins and JUnit must be in ``~/.m2``), RSpec,
Minitest (``rake test``), PHPUnit, ExUnit (``mix test``), CTest (CMake + a C compiler), Bun and
Deno (``tests/toolchains/node_modules/.bin``, installed by setup.sh from npm). Gradle and .NET
cannot run here: their folders hold outputs and reports from public repositories (see each
folder's README.md), which this script does not touch.

The same :data:`CASES` drive the live tests in ``tests/test_toolchain_new.py`` (via
:func:`run_case`), so a newer runner whose output no longer counts like the recording shows up there.

Usage (from the repository root)::

    .venv/bin/python tests/data/toolchains/record_toolchains.py               # every case
    .venv/bin/python tests/data/toolchains/record_toolchains.py rspec ctest   # some toolchains
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

# this folder is on sys.path: the script's own dir, or tests/test_toolchain_new.py's insert
from record_runner_outputs import run_project

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
NODE_BIN = REPO / "tests" / "toolchains" / "node_modules" / ".bin"
HEADER_PREFIX = "#% recorded by record_toolchains.py"


@dataclass(frozen=True)
class Case:
    """One recording: ``files`` written into an empty project, ``setup`` run there (not recorded),
    then ``argv`` (``argv[0]`` is a tool name looked up by :func:`tool_path`)."""

    toolchain: str
    name: str
    files: dict[str, str]
    argv: tuple[str, ...]
    setup: tuple[tuple[str, ...], ...] = field(default=())

    @property
    def path(self) -> Path:
        return HERE / self.toolchain / f"{self.name}.txt"


# --- projects -----------------------------------------------------------------------------------

POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>demo</groupId>
  <artifactId>calc</artifactId>
  <version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId>
      <artifactId>junit-jupiter</artifactId>
      <version>5.10.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
      <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version></plugin>
    </plugins>
  </build>
</project>
"""
CALC_JAVA = "package demo;\n\npublic class Calc {\n    public static int add(int a, int b) { return a + b; }\n}\n"
CALC_TEST_JAVA = """package demo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.Disabled;
import org.junit.jupiter.api.Test;

class CalcTest {
    @Test
    void addsSmallNumbers() { assertEquals(3, Calc.add(1, 2)); }

    @Test
    void wrongOnPurpose() { assertEquals(5, Calc.add(2, 2)); }

    @Test
    void throwsOnPurpose() { throw new IllegalStateException("boom"); }

    @Test
    @Disabled("not yet")
    void later() { assertEquals(0, Calc.add(0, 0)); }
}
"""
MAVEN = {"pom.xml": POM, "src/main/java/demo/Calc.java": CALC_JAVA, "src/test/java/demo/CalcTest.java": CALC_TEST_JAVA}

CALC_RB = "module Calc\n  def self.add(a, b) = a + b\nend\n"
RSPEC = {
    "lib/calc.rb": CALC_RB,
    ".rspec": "--require spec_helper\n",
    "spec/spec_helper.rb": "$LOAD_PATH.unshift File.expand_path(\"../lib\", __dir__)\n",
    "spec/calc_spec.rb": """require "calc"

RSpec.describe Calc do
  describe ".add" do
    it "adds small numbers" do
      expect(Calc.add(1, 2)).to eq(3)
    end

    it "adds wrongly on purpose" do
      expect(Calc.add(2, 2)).to eq(5)
    end

    it "raises on purpose" do
      raise "boom"
    end

    it "is pending", skip: "not yet" do
      expect(1).to eq(1)
    end
  end
end
""",
}
RSPEC_PENDING = {".rspec": "", "spec/p_spec.rb": 'RSpec.describe("later") { it("a", skip: "not yet") { }; xit("b") { } }\n'}
RSPEC_LOAD_ERROR = {
    ".rspec": "",
    "spec/ok_spec.rb": 'RSpec.describe("ok") { it("works") { expect(1).to eq(1) } }\n',
    "spec/broken_spec.rb": 'require "no_such_library"\n',
}

RAKEFILE = """require "rake/testtask"

Rake::TestTask.new(:test) do |t|
  t.libs << "test" << "lib"
  t.test_files = FileList["test/**/*_test.rb"]
end

task default: :test
"""
MINITEST = {
    "Rakefile": RAKEFILE,
    "lib/calc.rb": CALC_RB,
    "test/calc_test.rb": """require "minitest/autorun"
require "calc"

class CalcTest < Minitest::Test
  def test_adds_small_numbers
    assert_equal 3, Calc.add(1, 2)
  end

  def test_adds_wrongly_on_purpose
    assert_equal 5, Calc.add(2, 2)
  end

  def test_raises_on_purpose
    raise "boom"
  end

  def test_later
    skip "not yet"
  end
end
""",
}
MINITEST_EMPTY = {"Rakefile": RAKEFILE, "test/empty_test.rb": 'require "minitest/autorun"\n\nclass EmptyTest < Minitest::Test\nend\n'}

PHPUNIT_XML = """<?xml version="1.0" encoding="UTF-8"?>
<phpunit colors="false">
  <testsuites>
    <testsuite name="default">
      <directory>tests</directory>
    </testsuite>
  </testsuites>
</phpunit>
"""
CALC_PHP = "<?php\nfinal class Calc\n{\n    public static function add(int $a, int $b): int\n    {\n        return $a + $b;\n    }\n}\n"


def _php_test(methods: str) -> str:
    return ("<?php\nuse PHPUnit\\Framework\\TestCase;\n\nrequire_once __DIR__ . '/../src/Calc.php';\n\n"
            f"final class CalcTest extends TestCase\n{{\n{methods}}}\n")


PHP_ADD = "    public function testAddsSmallNumbers(): void\n    {\n        $this->assertSame(3, Calc::add(1, 2));\n    }\n"
PHP_WRONG = "    public function testAddsWronglyOnPurpose(): void\n    {\n        $this->assertSame(5, Calc::add(2, 2));\n    }\n"
PHP_RAISE = "    public function testRaisesOnPurpose(): void\n    {\n        throw new RuntimeException('boom');\n    }\n"
PHP_SKIP = "    public function testLater(): void\n    {\n        $this->markTestSkipped('not yet');\n    }\n"
PHP_INCOMPLETE = "    public function testSomeday(): void\n    {\n        $this->markTestIncomplete('todo');\n    }\n"
PHPUNIT_BASE = {"phpunit.xml.dist": PHPUNIT_XML, "src/Calc.php": CALC_PHP}

MIX_EXS = """defmodule Calc.MixProject do
  use Mix.Project

  def project do
    [app: :calc, version: "0.1.0", elixir: "~> 1.14", deps: []]
  end
end
"""
CALC_EX = '''defmodule Calc do
  @doc """
  Adds.

      iex> Calc.add(1, 2)
      3
  """
  def add(a, b), do: a + b
end
'''
EXUNIT_BASE = {"mix.exs": MIX_EXS, "lib/calc.ex": CALC_EX, "test/test_helper.exs": "ExUnit.start()\n"}
EXUNIT_TEST = """defmodule CalcTest do
  use ExUnit.Case
  doctest Calc

  test "adds small numbers" do
    assert Calc.add(1, 2) == 3
  end

  test "adds wrongly on purpose" do
    assert Calc.add(2, 2) == 5
  end

  test "raises on purpose" do
    raise "boom"
  end

  @tag :skip
  test "later" do
    assert true
  end

  describe "nested" do
    test "works" do
      assert Calc.add(0, 0) == 0
    end
  end
end
"""

CMAKELISTS = """cmake_minimum_required(VERSION 3.16)
project(calc C)
enable_testing()
add_executable(check check.c)
add_test(NAME adds COMMAND check add)
add_test(NAME fails_on_purpose COMMAND check fail)
add_test(NAME skipped_on_purpose COMMAND check skip)
set_tests_properties(skipped_on_purpose PROPERTIES SKIP_RETURN_CODE 77)
add_test(NAME disabled_one COMMAND check add)
set_tests_properties(disabled_one PROPERTIES DISABLED TRUE)
"""
CHECK_C = """#include <stdio.h>
#include <string.h>

static int add(int a, int b) { return a + b; }

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    if (strcmp(argv[1], "add") == 0) return add(1, 2) == 3 ? 0 : 1;
    if (strcmp(argv[1], "fail") == 0) { printf("expected 5, got %d\\n", add(2, 2)); return add(2, 2) == 5 ? 0 : 1; }
    if (strcmp(argv[1], "skip") == 0) { printf("not yet\\n"); return 77; }
    return 2;
}
"""
CTEST = {"CMakeLists.txt": CMAKELISTS, "check.c": CHECK_C}
CTEST_CONFIGURE = (("cmake", "-S", ".", "-B", "build"), ("cmake", "--build", "build"))

CALC_TS = "export function add(a: number, b: number): number {\n  return a + b;\n}\n"
BUN = {
    "bunfig.toml": "[test]\n",
    "calc.ts": CALC_TS,
    "calc.test.ts": """import { describe, expect, test } from "bun:test";
import { add } from "./calc";

describe("add", () => {
  test("adds small numbers", () => {
    expect(add(1, 2)).toBe(3);
  });

  test("adds wrongly on purpose", () => {
    expect(add(2, 2)).toBe(5);
  });

  test("throws on purpose", () => {
    throw new Error("boom");
  });

  test.skip("later", () => {});

  test.todo("someday");
});
""",
}
BUN_SKIPPED = {"bunfig.toml": "[test]\n",
               "later.test.ts": 'import { test } from "bun:test";\n\ntest.skip("a", () => {});\ntest.skip("b", () => {});\n'}
DENO_TEST = """import { add } from "./calc.ts";

function assertEquals(actual: unknown, expected: unknown): void {
  if (actual !== expected) throw new Error(`expected ${expected}, got ${actual}`);
}

Deno.test("adds small numbers", () => {
  assertEquals(add(1, 2), 3);
});

Deno.test("adds wrongly on purpose", () => {
  assertEquals(add(2, 2), 5);
});

Deno.test({ name: "later", ignore: true, fn() {} });

Deno.test("with steps", async (t) => {
  await t.step("inner ok", () => {
    assertEquals(add(0, 0), 0);
  });
  await t.step("inner fails", () => {
    assertEquals(add(1, 1), 3);
  });
});
"""
DENO = {"deno.json": "{}\n", "calc.ts": CALC_TS, "calc_test.ts": DENO_TEST}

CASES: list[Case] = [
    Case("maven", "fail", MAVEN, ("mvn", "-o", "-B", "-ntp", "test")),
    Case("maven", "no-tests", {"pom.xml": POM, "src/main/java/demo/Calc.java": CALC_JAVA}, ("mvn", "-o", "-B", "-ntp", "test")),
    Case("rspec", "fail", RSPEC, ("rspec",)),
    Case("rspec", "pending", RSPEC_PENDING, ("rspec",)),
    Case("rspec", "load-error", RSPEC_LOAD_ERROR, ("rspec",)),
    Case("rspec", "zero", {".rspec": "", "spec/.keep": ""}, ("rspec",)),
    Case("minitest", "fail", MINITEST, ("rake", "test")),
    Case("minitest", "fail-verbose", MINITEST, ("rake", "test", "TESTOPTS=-v")),
    Case("minitest", "zero", MINITEST_EMPTY, ("rake", "test")),
    Case("phpunit", "fail", {**PHPUNIT_BASE, "tests/CalcTest.php": _php_test(PHP_ADD + PHP_WRONG + PHP_RAISE + PHP_SKIP + PHP_INCOMPLETE)},
         ("phpunit",)),
    Case("phpunit", "ok", {**PHPUNIT_BASE, "tests/CalcTest.php": _php_test(PHP_ADD)}, ("phpunit",)),
    Case("phpunit", "skipped", {**PHPUNIT_BASE, "tests/CalcTest.php": _php_test(PHP_SKIP + PHP_INCOMPLETE)}, ("phpunit",)),
    Case("phpunit", "zero", {**PHPUNIT_BASE, "tests/.keep": ""}, ("phpunit",)),
    Case("exunit", "fail", {**EXUNIT_BASE, "test/calc_test.exs": EXUNIT_TEST}, ("mix", "test")),
    Case("exunit", "excluded", {**EXUNIT_BASE, "test/calc_test.exs": EXUNIT_TEST}, ("mix", "test", "--only", "nothing")),
    Case("exunit", "empty-module", {**EXUNIT_BASE, "test/empty_test.exs": "defmodule EmptyTest do\n  use ExUnit.Case\nend\n"},
         ("mix", "test")),
    Case("exunit", "no-test-files", EXUNIT_BASE, ("mix", "test")),
    Case("ctest", "fail", CTEST, ("ctest", "--test-dir", "build", "--output-on-failure"), CTEST_CONFIGURE),
    Case("ctest", "pass", CTEST, ("ctest", "--test-dir", "build", "-R", "adds"), CTEST_CONFIGURE),
    Case("ctest", "skipped", CTEST, ("ctest", "--test-dir", "build", "-R", "skipped"), CTEST_CONFIGURE),
    Case("ctest", "zero", CTEST, ("ctest", "--test-dir", "build", "-R", "nothing_matches"), CTEST_CONFIGURE),
    Case("bun", "fail", BUN, ("bun", "test")),
    Case("bun", "skipped", BUN_SKIPPED, ("bun", "test")),
    Case("bun", "filter-zero", BUN, ("bun", "test", "-t", "nothing_matches")),
    Case("bun", "no-files", {"bunfig.toml": "[test]\n"}, ("bun", "test")),
    Case("deno", "fail", DENO, ("deno", "test", "--no-prompt")),
    Case("deno", "filter-zero", DENO, ("deno", "test", "--no-prompt", "--filter", "nothing_matches")),
    Case("deno", "no-modules", {"deno.json": "{}\n"}, ("deno", "test", "--no-prompt")),
]


# --- running ------------------------------------------------------------------------------------


def tool_path(name: str) -> str | None:
    """The executable of a tool (PATH, then ``tests/toolchains/node_modules/.bin`` for bun/deno),
    or None."""
    if name in ("bun", "deno"):
        p = NODE_BIN / name
        if p.exists():
            return str(p)
    return shutil.which(name)


def _version(argv: list[str], starts: str = "") -> str:
    """The first non-empty output line of ``argv`` (starting with ``starts``), ANSI-free."""
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", x).strip() for x in (p.stdout + "\n" + p.stderr).splitlines()]
    lines = [x for x in lines if x and x.startswith(starts)]
    return lines[0] if lines else "unknown"


def tool_version(name: str) -> str:
    """One line naming the tool and its version (for the header)."""
    exe = tool_path(name) or name
    ruby = _version(["ruby", "--version"])
    if name == "mvn":
        return f"{_version([exe, '--version'])}; {_version(['java', '-version'])}"
    if name == "mix":
        return _version(["elixir", "--version"], "Elixir")
    if name == "rake":
        return f"{_version([exe, '--version'])}; minitest {_version(['ruby', '-e', 'require %q(minitest); puts Minitest::VERSION'])}; {ruby}"
    if name == "rspec":
        return f"rspec-core {_version(['ruby', '-e', 'require %q(rspec/core); puts RSpec::Core::Version::STRING'])}; {ruby}"
    if name == "ctest":
        return f"{_version([exe, '--version'])}; {_version(['cc', '--version'])}"
    if name == "bun":
        return f"bun {_version([exe, '--version'])}"
    return _version([exe, "--version"])


def run_env(work: Path) -> dict[str, str]:
    """The environment of a recorded run: colour switches and CI markers removed, caches in ``work``."""
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR", "CI", "MIX_ENV", "RUST_BACKTRACE")}
    env.update({"HOME": os.environ.get("HOME", str(work)), "DENO_NO_UPDATE_CHECK": "1", "DENO_DIR": str(work / "deno-cache"),
                "BUN_INSTALL_CACHE_DIR": str(work / "bun-cache"), "MIX_HOME": str(work / "mix-home"), "HEX_OFFLINE": "1"})
    return env


def run_case(case: Case, timeout_s: float = 300) -> tuple[int, str]:
    """Build the case's project in a fresh temp dir, run it, return ``(exit code, output)`` (merged
    streams, UTF-8 with replacement, the temp path replaced by ``/tmp/proj``).

    Raises:
        FileNotFoundError: the case's tool is not installed.
    """
    exe = tool_path(case.argv[0])
    if exe is None:
        raise FileNotFoundError(f"{case.argv[0]} is not installed")
    return run_project([exe, *case.argv[1:]], case.files, case.setup, run_env, tool_path, timeout_s)


def record(case: Case) -> Path | None:
    """Run ``case`` and write its file; None when the tool is missing."""
    if tool_path(case.argv[0]) is None:
        print(f"skip {case.toolchain}/{case.name}: {case.argv[0]} not installed", file=sys.stderr)
        return None
    code, text = run_case(case)
    case.path.parent.mkdir(parents=True, exist_ok=True)
    head = f"{HEADER_PREFIX}; tool: {tool_version(case.argv[0])}; argv: {' '.join(case.argv)}; exit: {code}"
    case.path.write_text(head + "\n" + text, encoding="utf-8")
    print(f"wrote {case.toolchain}/{case.name}.txt (exit {code}, {len(text)} chars)", file=sys.stderr)
    return case.path


def main(argv: list[str]) -> int:
    wanted = set(argv)
    for case in CASES:
        if not wanted or case.toolchain in wanted:
            record(case)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
