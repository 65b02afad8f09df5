"""acceptance.config: split_cmd, layer reading/merging, check resolution, derived defaults (docs/acceptance.md
§1–§2)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tianshu_mcp.acceptance.config import (
    AcceptanceConfig,
    AcceptanceConfigError,
    CheckDef,
    derive_default_checks,
    detect_pytest,
    merge_configs,
    parse_layer,
    read_layer,
    resolve_checks,
    resolve_layers,
    split_cmd,
    summarize_resolved,
    to_check_def,
)
from tianshu_mcp.core.errors import ErrorCode


# --- split_cmd (docs/acceptance.md §1.2 and the acceptance.json doc table) -----------------------


@pytest.mark.parametrize(
    ("src", "expected"),
    [
        ("npm run build", ["npm", "run", "build"]),
        ('npm run "a b"', ["npm", "run", "a b"]),
        ("npm run 'a b'", ["npm", "run", "a b"]),
        ('node "a\\"b"', ["node", "a\\", 'b"']),  # no escapes: the quote ends at the first "
        ('cmd "" x', ["cmd", "", "x"]),  # empty quotes give an empty token
        ('a"b c"', ['a"b', 'c"']),  # glued quotes are not stripped
        ('echo "unclosed', ["echo", '"unclosed']),  # unclosed quote stays in a plain token
        ("echo 'unclosed x", ["echo", "'unclosed", "x"]),
        ("  spaced\t\targs  \n", ["spaced", "args"]),
        ("", []),
        ("   ", []),
        ("pytest -q -k 'not slow'", ["pytest", "-q", "-k", "not slow"]),
        ("\"x y\"'z w'", ["x y", "z w"]),
    ],
)
def test_split_cmd(src: str, expected: list[str]) -> None:
    assert split_cmd(src) == expected


def test_to_check_def_normalises_str_and_list() -> None:
    d = to_check_def({"name": "t", "cmd": 'npm run "a b"', "timeoutMs": 5000, "extra": 1})
    assert d == CheckDef(name="t", cmd=("npm", "run", "a b"), display_cmd="npm run a b", timeout_ms=5000, optional=False)
    d2 = to_check_def({"name": "l", "cmd": ["a b", "c"], "optional": True})
    assert d2.cmd == ("a b", "c") and d2.display_cmd == "a b c" and d2.optional
    assert d2.to_json() == {"name": "l", "cmd": ["a b", "c"], "displayCmd": "a b c", "optional": True}


# --- layer parsing ---------------------------------------------------------------------------


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_partial_schema_drops_unknown_keys_and_clamps_concurrency() -> None:
    cfg = parse_layer(
        {"checks": [{"name": "a", "cmd": "x", "bogus": 1}], "unknownTop": True, "verifyConcurrency": 99},
        "project",
        "/p",
    )
    assert cfg.verify_concurrency == 4
    assert cfg.require_changes is None and cfg.visual is None
    assert cfg.to_json() == {"checks": [{"name": "a", "cmd": "x"}], "verifyConcurrency": 4}
    assert parse_layer({"verifyConcurrency": 0}, "g", "p").verify_concurrency == 1
    assert parse_layer({"verifyConcurrency": 2.5}, "g", "p").verify_concurrency == 3  # JS Math.round
    assert parse_layer({"verifyConcurrency": -7}, "g", "p").verify_concurrency == 1
    assert parse_layer(json.loads('{"verifyConcurrency": NaN}'), "g", "p").verify_concurrency == 1


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"checks": [{"name": "a", "cmd": ""}]}, "checks.0.cmd"),
        ({"checks": [{"name": "a", "cmd": []}]}, "checks.0.cmd"),
        ({"checks": [{"name": "a", "cmd": ["x", ""]}]}, "checks.0.cmd"),
        ({"checks": [{"name": "", "cmd": "x"}]}, "checks.0.name"),
        ({"checks": [{"cmd": "x"}]}, "checks.0.name"),
        ({"checks": [{"name": "a", "cmd": "x", "timeoutMs": 0}]}, "checks.0.timeoutMs"),
        ({"checks": [{"name": "a", "cmd": "x", "timeoutMs": 1.5}]}, "checks.0.timeoutMs"),
        ({"checks": [{"name": "a", "cmd": "x", "optional": "yes"}]}, "checks.0.optional"),
        ({"checks": "npm test"}, "checks"),
        ({"requireChanges": "false"}, "requireChanges"),
        ({"verifyConcurrency": "2"}, "verifyConcurrency"),
        ({"visual": []}, "visual"),
        ({"checks": None}, "checks"),
        ([1, 2], "(root)"),
    ],
)
def test_schema_violations_name_the_field(data: object, field: str) -> None:
    with pytest.raises(AcceptanceConfigError) as ei:
        parse_layer(data, "project", "/proj/.tianshu-mcp/acceptance.json")
    err = ei.value
    assert err.code is ErrorCode.CONFIG_INVALID
    assert "project" in err.message and "/proj/.tianshu-mcp/acceptance.json" in err.message
    assert field.split(".")[0] in err.message or field == "(root)"
    assert err.render().startswith("Error: [CONFIG_INVALID] ")


def test_read_layer_missing_is_none(tmp_path: Path) -> None:
    assert read_layer(tmp_path / "nope.json", "global") is None


def test_read_layer_invalid_json_names_layer_and_file(tmp_path: Path) -> None:
    p = _write(tmp_path / "proj" / ".tianshu-mcp" / "acceptance.json", "{not json")
    with pytest.raises(AcceptanceConfigError) as ei:
        read_layer(p, "project")
    assert ei.value.code is ErrorCode.CONFIG_INVALID
    assert str(p) in ei.value.message and "project" in ei.value.message
    assert ei.value.layer == "project" and ei.value.path == str(p)


def test_read_layer_schema_violation_names_field_and_file(tmp_path: Path) -> None:
    p = _write(tmp_path / "acceptance.default.json", json.dumps({"checks": [{"name": "x", "cmd": 5}]}))
    with pytest.raises(AcceptanceConfigError) as ei:
        read_layer(p, "global")
    msg = ei.value.message
    assert ei.value.code is ErrorCode.CONFIG_INVALID
    assert "global" in msg and str(p) in msg and "checks.0.cmd" in msg


def test_read_layer_directory_is_unreadable(tmp_path: Path) -> None:
    p = tmp_path / "proj" / ".tianshu-mcp" / "acceptance.json"
    p.mkdir(parents=True)
    with pytest.raises(AcceptanceConfigError) as ei:
        read_layer(p, "project")
    assert ei.value.code is ErrorCode.CONFIG_UNREADABLE
    assert str(p) in ei.value.message and "project" in ei.value.message


def test_read_layer_accepts_bom(tmp_path: Path) -> None:
    p = tmp_path / "a.json"
    p.write_bytes(b"\xef\xbb\xbf" + b'{"requireChanges": false}')
    cfg = read_layer(p, "project")
    assert cfg is not None and cfg.require_changes is False


def test_merge_is_shallow_and_checks_replace() -> None:
    base = AcceptanceConfig.model_validate(
        {"checks": [{"name": "a", "cmd": "a"}, {"name": "b", "cmd": "b"}], "requireChanges": False,
         "visual": {"enabled": False, "baselineRoot": "a"}}
    )
    over = AcceptanceConfig.model_validate({"checks": [{"name": "c", "cmd": "c"}], "visual": {"baselineRoot": "b"}})
    merged = merge_configs(base, over)
    assert [c.name for c in merged.checks or []] == ["c"]
    assert merged.visual == {"baselineRoot": "b"}  # no deep merge
    assert merged.require_changes is False  # kept from the lower layer


def test_resolve_layers_order_and_applied(tmp_path: Path) -> None:
    home = tmp_path / "home"
    proj = tmp_path / "proj"
    _write(home / "acceptance.default.json", json.dumps({"requireChanges": False, "verifyConcurrency": 3}))
    _write(proj / ".tianshu-mcp" / "acceptance.json", json.dumps({"verifyConcurrency": 1, "checks": []}))
    cfg, applied = resolve_layers(proj, home, {"requireChanges": True})
    assert cfg.require_changes is True and cfg.verify_concurrency == 1 and cfg.checks == []
    assert [a["source"] for a in applied] == ["global", "project", "override"]
    assert applied[0]["path"] == str(home / "acceptance.default.json")
    cfg2, applied2 = resolve_layers(proj / "missing", tmp_path / "nohome", None)
    assert cfg2.defined() == {} and applied2 == []


def test_override_layer_error_names_acceptance_override(tmp_path: Path) -> None:
    with pytest.raises(AcceptanceConfigError) as ei:
        resolve_layers(tmp_path, tmp_path, {"requireChanges": 1})
    assert ei.value.code is ErrorCode.CONFIG_INVALID
    assert "override" in ei.value.message and "acceptanceOverride" in ei.value.message


# --- resolve_checks (§2.1 final values, §2.2) -------------------------------------------------


def test_resolve_checks_uses_layer_checks_even_empty(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    _write(proj / "pytest.ini", "[pytest]\n")
    _write(proj / ".tianshu-mcp" / "acceptance.json", json.dumps({"checks": []}))
    r = resolve_checks(proj, tmp_path / "home", None)
    assert r.checks == [] and r.require_changes is True and r.verify_concurrency is None
    assert r.applied == [{"source": "project", "path": str(proj / ".tianshu-mcp" / "acceptance.json")}]
    assert any("config layers" in n for n in r.notes)
    assert "layers=project" in summarize_resolved(r)


def test_resolve_checks_extra_append_and_replace(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    _write(proj / ".tianshu-mcp" / "acceptance.json", json.dumps({"checks": [{"name": "base", "cmd": "true"}]}))
    extra = [{"name": "extra", "cmd": ["echo", "hi"]}]
    r = resolve_checks(proj, tmp_path, None, extra_checks=extra)
    assert [c.name for c in r.checks] == ["base", "extra"]
    assert any("extraChecks appends 1" in n for n in r.notes)
    r2 = resolve_checks(proj, tmp_path, None, extra_checks=extra, checks_mode="replace")
    assert [c.name for c in r2.checks] == ["extra"]
    assert any("checksMode=replace" in n for n in r2.notes)
    r3 = resolve_checks(proj, tmp_path, None, extra_checks=[], checks_mode="replace")  # behaves like append
    assert [c.name for c in r3.checks] == ["base"]


def test_resolve_checks_project_verify_before_defaults(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    _write(proj / "pytest.ini", "[pytest]\n")
    r = resolve_checks(proj, tmp_path, None, project_verify=[{"name": "pv", "cmd": "make check"}])
    assert [(c.name, c.cmd) for c in r.checks] == [("pv", ("make", "check"))]
    assert any("projects.json" in n for n in r.notes)


def test_resolve_checks_invalid_extra_check_is_config_invalid(tmp_path: Path) -> None:
    with pytest.raises(AcceptanceConfigError) as ei:
        resolve_checks(tmp_path, tmp_path, None, extra_checks=[{"name": "x"}])
    assert ei.value.code is ErrorCode.CONFIG_INVALID and "extraChecks" in ei.value.message


def test_resolve_checks_final_values(tmp_path: Path) -> None:
    _write(tmp_path / "home" / "acceptance.default.json", json.dumps({"requireChanges": False, "verifyConcurrency": 9}))
    r = resolve_checks(tmp_path / "proj", tmp_path / "home", None)
    assert r.require_changes is False and r.verify_concurrency == 4
    visual = {"enabled": True, "images": [{"id": "logo", "files": ["logo.png"]}]}
    r2 = resolve_checks(tmp_path / "proj", tmp_path / "home", {"visual": visual})
    assert r2.visual == visual


# --- derived defaults (§2.3, pytest detection extended) ---------------------------------------


def _names(checks: list[CheckDef]) -> list[tuple[str, bool]]:
    return [(c.name, c.optional) for c in checks]


def test_derived_empty_project(tmp_path: Path) -> None:
    assert derive_default_checks(tmp_path) == ([], [])


def test_derived_package_json_scripts(tmp_path: Path) -> None:
    _write(tmp_path / "package.json", json.dumps({"scripts": {"test": "jest", "lint": "eslint ."}}))
    _write(tmp_path / "tsconfig.json", "{}")  # ignored when scripts exist
    checks, notes = derive_default_checks(tmp_path)
    assert _names(checks) == [("lint", False), ("test", False)]
    assert checks[0].cmd == ("npm", "run", "lint")
    assert notes == ["package.json lacks scripts (skipped): typecheck/build."]


def test_derived_package_json_without_known_scripts(tmp_path: Path) -> None:
    _write(tmp_path / "package.json", json.dumps({"scripts": {"start": "node ."}}))
    checks, notes = derive_default_checks(tmp_path)
    assert checks == [] and "no typecheck/lint/test/build" in notes[0]


def test_derived_tsc_optional_go_and_cargo_tests_mandatory(tmp_path: Path) -> None:
    _write(tmp_path / "package.json", "{broken")  # invalid = absent
    _write(tmp_path / "tsconfig.json", "{}")
    _write(tmp_path / "go.mod", "module x\n")
    _write(tmp_path / "Cargo.toml", "[package]\n")
    checks, _ = derive_default_checks(tmp_path)
    # a failing Go or Rust test suite must fail the round, like pytest's (the original made them optional)
    assert _names(checks) == [("typecheck-tsc", True), ("go-test", False), ("cargo-test", False)]
    assert checks[0].cmd == ("npx", "tsc", "--noEmit")


@pytest.mark.parametrize(
    ("files", "why"),
    [
        ({"pytest.ini": "[pytest]\n"}, "pytest.ini"),
        ({"pyproject.toml": '[project]\nname = "x"\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'}, "pyproject.toml"),
        ({"setup.cfg": "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n"}, "setup.cfg"),
        ({"tox.ini": "[tox]\nenvlist = py311\n\n[pytest]\naddopts = -q\n"}, "tox.ini"),
        ({"tests/unit/test_core.py": "def test_x():\n    pass\n"}, "tests/"),
    ],
)
def test_derived_pytest_is_mandatory(tmp_path: Path, files: dict[str, str], why: str) -> None:
    for rel, text in files.items():
        _write(tmp_path / rel, text)
    checks, notes = derive_default_checks(tmp_path)
    assert _names(checks) == [("pytest", False)]
    assert checks[0].cmd == ("pytest", "-q")
    assert why in (detect_pytest(tmp_path) or "")
    assert any("mandatory" in n for n in notes)


def test_derived_pyproject_without_pytest_is_not_a_pytest_project(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.ruff]\nline-length = 100\n')
    _write(tmp_path / "tests" / "helpers.py", "X = 1\n")
    _write(tmp_path / "setup.cfg", "[flake8]\nmax-line-length = 100\n")
    assert derive_default_checks(tmp_path) == ([], [])


def test_resolve_checks_falls_back_to_derived(tmp_path: Path) -> None:
    _write(tmp_path / "pyproject.toml", "[tool.pytest.ini_options]\n")
    r = resolve_checks(tmp_path, tmp_path / "home", None)
    assert _names(r.checks) == [("pytest", False)]
    assert r.notes[-1].startswith("Using the default acceptance set")
    assert all(c.name != "git-diff-check" for c in r.checks)


def test_project_less_resolution_uses_only_global_and_override(tmp_path: Path) -> None:
    r = resolve_checks(None, tmp_path, {"checks": [{"name": "x", "cmd": "true"}]})
    assert [c.name for c in r.checks] == ["x"] and r.applied == [{"source": "override", "path": "acceptanceOverride"}]
    assert resolve_checks(None, tmp_path, None).checks == []


def test_unreadable_file_permission(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root can read any file")
    p = _write(tmp_path / "acceptance.default.json", "{}")
    p.chmod(0)
    try:
        with pytest.raises(AcceptanceConfigError) as ei:
            read_layer(p, "global")
        assert ei.value.code is ErrorCode.CONFIG_UNREADABLE
    finally:
        p.chmod(0o644)


def test_derived_pytest_prefers_project_venv(tmp_path: Path) -> None:
    _write(tmp_path / "pytest.ini", "[pytest]\n")
    exe = _write(tmp_path / ".venv" / "bin" / "pytest", "#!/bin/sh\n")
    exe.chmod(0o755)
    checks, notes = derive_default_checks(tmp_path)
    assert checks[0].cmd == (str(exe), "-q") and not checks[0].optional
    assert any("virtualenv" in n for n in notes)


@pytest.mark.parametrize("cmd", ["true && false", "pytest -q | tee out", "make ; make test", "pytest > log"])
def test_string_cmd_with_a_shell_operator_is_refused(cmd: str) -> None:
    # pins a finding: `true && false` ran `true` with arguments and passed
    from tianshu_mcp.acceptance.config import AcceptanceConfigError, parse_layer

    with pytest.raises(AcceptanceConfigError) as err:
        parse_layer({"checks": [{"name": "x", "cmd": cmd}]}, "override", "acceptanceOverride")
    assert err.value.code.value == "CONFIG_INVALID" and "shell operator" in err.value.message
    # the argv form can still pass such a token as a literal argument
    parse_layer({"checks": [{"name": "x", "cmd": ["echo", "&&"]}]}, "override", "acceptanceOverride")


@pytest.mark.parametrize("special", ["fifo", "devzero"])
def test_a_layer_that_is_not_a_regular_file_is_unreadable(tmp_path: Path, special: str) -> None:
    import os

    from tianshu_mcp.acceptance.config import AcceptanceConfigError, read_layer

    path = tmp_path / "acceptance.json"
    if special == "fifo":
        os.mkfifo(path)  # reading it would block the round forever
    else:
        path.symlink_to("/dev/zero")  # reading it would exhaust memory
    with pytest.raises(AcceptanceConfigError) as err:
        read_layer(path, "project")
    assert err.value.code.value == "CONFIG_UNREADABLE" and "not a regular file" in err.value.message
