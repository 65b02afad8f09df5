"""``node --test``: counts of the spec reporter (``ℹ tests N``) and its zero-test rule; the TAP
reporter (the default when stdout is not a terminal) is counted by :mod:`.tap`.
"""

from __future__ import annotations

import re

from .base import CountFormat, TestCounts, TestInfra, Toolchain

_NODE_SPEC_ZERO = re.compile(r"^\s*ℹ\s+tests\s+0\s*$", re.M)
_NODE_SPEC_SOME = re.compile(r"^\s*ℹ\s+tests\s+[1-9]\d*\s*$", re.M)

_NODE_SPEC_SUM = re.compile(r"^ℹ (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)\s*$", re.M)
_NODE_SPEC_ITEM = re.compile(r"^( *)(✔|✖|﹣|▶) (.+?)(?: \([\d.]+m?s\))?(?: # (.*))?$")  # on rstripped lines


def _parse_node_spec(text: str) -> TestCounts | None:
    found = _NODE_SPEC_SUM.findall(text)
    if not any(k == "tests" for k, _ in found):
        return None
    c: dict[str, int] = {}
    for k, v in found:
        c[k] = c.get(k, 0) + int(v)
    failed_ids: list[str] = []
    passed_ids: list[str] = []
    stack: list[tuple[int, str]] = []
    for line in text.split("\n"):
        if line.startswith("✖ failing tests:"):
            break
        m = _NODE_SPEC_ITEM.match(line.rstrip())  # no trailing \s*$ after a lazy group: linear
        if not m:
            continue
        indent, glyph, name, directive = len(m.group(1)), m.group(2), m.group(3), m.group(4) or ""
        while stack and stack[-1][0] > indent:
            stack.pop()
        if glyph == "▶":
            stack.append((indent, name))
            continue
        if stack and stack[-1][0] == indent and stack[-1][1] == name:
            stack.pop()  # the suite's own result line
            continue
        full = " > ".join([s for i, s in stack if i < indent] + [name])
        todo = directive.upper().startswith("TODO")
        if glyph == "✔" and not todo:
            passed_ids.append(full)
        elif glyph == "✖" and not todo:
            failed_ids.append(full)
    return TestCounts(
        "node-spec",
        passed=c.get("pass", 0),
        failed=c.get("fail", 0) + c.get("cancelled", 0),
        skipped=c.get("skipped", 0) + c.get("todo", 0),
        failed_ids=failed_ids,
        passed_ids=passed_ids,
    )


def _zero(text: str) -> bool:
    """The spec reporter's ``ℹ tests 0`` (and no ``ℹ tests N>0``)."""
    return bool(_NODE_SPEC_ZERO.search(text)) and not _NODE_SPEC_SOME.search(text)



INFRA = TestInfra(
    files=("*.test.js", "*.test.mjs", "*.test.cjs", "*.test.ts", "*.test.jsx", "*.test.tsx", "*.spec.js", "*.spec.mjs", "*.spec.cjs", "*.spec.ts", "*.spec.jsx", "*.spec.tsx", "*-test.js", "*_test.js", "*-test.mjs", "test-*.js", "test-*.mjs", "test.js", "test.mjs", "**/test/**", "**/tests/**", "**/__tests__/**", "**/__mocks__/**", ".npmrc", ".node-options"),
    aware=(re.compile(r"\bNODE_TEST_CONTEXT\b|process\.argv[^\n]*--test\b|[\'\"](?:node:)?test[\'\"]\s*\)"
                      r"|from\s+[\'\"](?:node:)?test[\'\"]|process\.execArgv|\bNODE_ENV\b[^\n]*[\'\"]test[\'\"]"
                      r"|require\.cache|Module\.prototype|\bassert\.\w+\s*=(?!=)"
                      # an assertion function of node:assert replaced, whatever the module is called
                      # (names production objects rarely carry: not ``ok``, ``equal`` or ``match``)
                      r"|\.(?:strictEqual|deepStrictEqual|deepEqual|notStrictEqual|notDeepStrictEqual|notDeepEqual"
                      r"|partialDeepStrictEqual|throws|doesNotThrow|rejects|doesNotReject|doesNotMatch|ifError)\s*=(?!=)"),),
    aware_files=("*.js", "*.mjs", "*.cjs", "*.ts", "*.jsx", "*.tsx"),
)
"""``node --test``'s test infrastructure: the files its default patterns run and the ``.npmrc``
that can preload code into every node process (``node-options``) (docs/integrity.md)."""

TOOLCHAIN = Toolchain(
    id="node",
    order=86,
    test_command=re.compile(r"\bnode\s+--test\b"),
    hint=re.compile(r"\bnode\b.*\s--test\b"),
    hint_formats=("node-spec", "tap"),
    formats=(CountFormat("node-spec", _parse_node_spec, 70),),
    zero=_zero,
    infra=INFRA,
)
