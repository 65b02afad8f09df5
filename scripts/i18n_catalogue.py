"""Extract, update and compile the gettext catalogue of tianshu-mcp (docs/host-parity.md §3).

Run from the repository root with the dev environment (Babel is a test/dev dependency)::

    .venv/bin/python scripts/i18n_catalogue.py            # extract → update .po → compile .mo
    .venv/bin/python scripts/i18n_catalogue.py --check    # exit 1 when the .pot/.po/.mo are stale

* ``core/locale/tianshu_mcp.pot`` — every ``_()`` / ``N_()`` / ``ngettext()`` msgid of the
  package folders (file names, no line numbers: moving code does not churn the catalogue).
* ``core/locale/<locale>/LC_MESSAGES/tianshu_mcp.po`` — updated from the template without fuzzy
  matching (a new msgid arrives untranslated; ``tests/test_i18n.py`` fails until it is
  translated); obsolete entries are dropped.
* ``….mo`` — compiled from the ``.po`` by Babel; the stdlib ``gettext`` reads it at run time.
"""

from __future__ import annotations

import argparse
import io
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import DEFAULT_KEYWORDS, extract_from_dir
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("core", "adapters", "acceptance", "tasks", "flows", "deployments", "hosting", "mcp_server", "console", "skills")
LOCALE_DIR = ROOT / "core" / "locale"
DOMAIN = "tianshu_mcp"
LOCALES = ("zh_CN",)
KEYWORDS = {**DEFAULT_KEYWORDS, "N_": None}


def extract() -> Catalog:
    """A template catalogue of every msgid in :data:`SOURCE_DIRS` (python-brace-format flagged)."""
    template = Catalog(project="tianshu-mcp", domain=DOMAIN, fuzzy=False, charset="utf-8")
    for folder in SOURCE_DIRS:
        for filename, lineno, message, comments, context in extract_from_dir(
                ROOT / folder, method_map=[("**.py", "python")], keywords=KEYWORDS, comment_tags=("i18n:",)):
            msgid = message if isinstance(message, str) else tuple(message)
            flags = ("python-brace-format",) if any("{" in m for m in (msgid if isinstance(msgid, tuple) else (msgid,))) else ()
            template.add(msgid, locations=[(f"{folder}/{filename}", lineno)], auto_comments=comments, flags=flags,
                         context=context)
    return template


def po_path(locale: str) -> Path:
    """``core/locale/<locale>/LC_MESSAGES/tianshu_mcp.po``."""
    return LOCALE_DIR / locale / "LC_MESSAGES" / f"{DOMAIN}.po"


def render_po(catalog: Catalog) -> bytes:
    """The ``.po``/``.pot`` text of ``catalog`` as this project writes it (no line numbers, sorted by msgid)."""
    buf = io.BytesIO()
    write_po(buf, catalog, width=100, sort_output=True, include_lineno=False, ignore_obsolete=True)
    return buf.getvalue()


def compile_mo(po_file: Path) -> bytes:
    """The ``.mo`` bytes Babel compiles from ``po_file`` (fuzzy entries are left out)."""
    with po_file.open("rb") as fh:
        catalog = read_po(fh)
    buf = io.BytesIO()
    write_mo(buf, catalog, use_fuzzy=False)
    return buf.getvalue()


def updated_po(locale: str, template: Catalog) -> Catalog:
    """The locale's catalogue brought up to ``template`` (no fuzzy matching; obsolete dropped)."""
    path = po_path(locale)
    if path.is_file():
        with path.open("rb") as fh:
            catalog = read_po(fh, locale=locale)
    else:
        catalog = Catalog(locale=locale, domain=DOMAIN, project="tianshu-mcp", fuzzy=False)
    catalog.update(template, no_fuzzy_matching=True, update_header_comment=False)
    catalog.obsolete.clear()
    catalog.fuzzy = False
    return catalog


def main(argv: list[str] | None = None) -> int:
    """Write (or, with ``--check``, compare) the ``.pot``, each ``.po`` and each ``.mo``; 1 when stale."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when a file is stale")
    args = parser.parse_args(argv)
    template = extract()
    outputs: dict[Path, bytes] = {LOCALE_DIR / f"{DOMAIN}.pot": render_po(template)}
    for locale in LOCALES:
        outputs[po_path(locale)] = render_po(updated_po(locale, template))
    stale = []
    for path, data in outputs.items():
        old = path.read_bytes() if path.is_file() else None
        if _strip_dates(old) != _strip_dates(data):
            stale.append(path)
            if not args.check:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    for locale in LOCALES:
        mo = po_path(locale).with_suffix(".mo")
        data = compile_mo(po_path(locale)) if po_path(locale).is_file() else b""
        if not mo.is_file() or mo.read_bytes() != data:
            stale.append(mo)
            if not args.check:
                mo.write_bytes(data)
    for path in stale:
        print(("stale: " if args.check else "wrote: ") + str(path.relative_to(ROOT)))
    return 1 if args.check and stale else 0


def _strip_dates(data: bytes | None) -> bytes | None:
    """The file without its ``POT-Creation-Date``/``PO-Revision-Date`` header lines (they change each run)."""
    if data is None:
        return None
    return b"\n".join(ln for ln in data.split(b"\n") if not ln.startswith((b'"POT-Creation-Date', b'"PO-Revision-Date')))


if __name__ == "__main__":
    sys.exit(main())
