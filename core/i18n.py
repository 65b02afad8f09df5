"""Human-facing text in the user's language: a gettext catalogue chosen by locale (docs/host-parity.md §3).

The locale of a process is ``$TIANSHU_MCP_LOCALE`` when set, else ``locale`` in
``<home>/config.json`` (:class:`~tianshu_mcp.core.settings.ServerConfig`), else ``en``.
Names are normalised: ``zh-CN`` / ``zh_CN`` / ``zh`` / ``zh-Hans`` → ``zh_CN``; ``en`` /
``en-US`` / ``en_GB`` … → ``en``. Any other value falls back to ``en`` and is logged once
(a WARNING naming the value and where it came from).

English is the message id: the source keeps its English text, wrapped as
``_("task {taskId} is {status}").format(taskId=..., status=...)`` — a constant msgid with named
placeholders (never ``_(f"...")``: an f-string cannot be extracted or looked up). ``N_`` marks a
constant for extraction whose translation is looked up later with ``_``. Codes (``[CODE]``),
meta keys, JSON and the ``---tianshu-mcp-meta---`` fence are never translated.

The catalogue is ``core/locale/zh_CN/LC_MESSAGES/tianshu_mcp.po`` and its compiled ``.mo``
(package data), read by the stdlib :mod:`gettext`; Babel only extracts and compiles
(``scripts/i18n_catalogue.py``), it is not needed at run time.

The locale is looked up at each call: the config file is re-read only when its size or mtime
changes, so a server follows an edited ``config.json`` without a restart.
"""

from __future__ import annotations

import gettext as _gettext
import json
import logging
import os
import threading
from functools import lru_cache
from pathlib import Path

log = logging.getLogger("tianshu_mcp")

DOMAIN = "tianshu_mcp"
"""The gettext domain: ``<LOCALE_DIR>/<locale>/LC_MESSAGES/tianshu_mcp.mo``."""
LOCALE_DIR = Path(__file__).with_name("locale")
"""Where the catalogues live (inside the installed package)."""
LOCALE_ENV = "TIANSHU_MCP_LOCALE"
"""Environment variable that overrides ``config.json`` ``locale`` for this process."""
DEFAULT_LOCALE = "en"
SUPPORTED = ("en", "zh_CN")
"""The locales this build has text for (``en`` is the source text itself)."""

_ALIASES = {
    "en": "en", "c": "en", "posix": "en",
    "zh": "zh_CN", "zh_cn": "zh_CN", "zh_hans": "zh_CN", "zh_hans_cn": "zh_CN", "zh_sg": "zh_CN",
}

_lock = threading.Lock()
_warned: set[tuple[str, str]] = set()
_config_cache: dict[str, tuple[tuple[int, int], str | None]] = {}


def normalize_locale(value: str | None) -> str | None:
    """The supported locale ``value`` names, or None when it names none.

    ``"zh-CN"``, ``"zh_CN"``, ``"zh"``, ``"zh-Hans"`` → ``"zh_CN"``; ``"en"``, ``"en-US"``,
    ``"en_GB.UTF-8"`` → ``"en"``; ``""``/None/``"xx"`` → None. Case and ``-``/``_`` do not matter;
    an encoding or modifier suffix (``.UTF-8``, ``@euro``) is ignored.
    """
    if not value or not isinstance(value, str):
        return None
    key = value.strip().split(".", 1)[0].split("@", 1)[0].replace("-", "_").lower()
    if key in _ALIASES:
        return _ALIASES[key]
    if key.startswith("en_"):
        return "en"
    return None


def _warn_once(source: str, value: str) -> None:
    with _lock:
        if (source, value) in _warned:
            return
        _warned.add((source, value))
    log.warning("unknown locale %r in %s; using %r (supported: %s)", value[:80], source, DEFAULT_LOCALE,
                ", ".join(SUPPORTED))


def _home() -> Path:
    """The data home without creating or checking it (that is :func:`settings.data_home`'s job)."""
    raw = os.environ.get("TIANSHU_MCP_HOME") or str(Path.home() / ".tianshu-mcp")
    return Path(raw).expanduser()


def _config_locale(home: Path) -> str | None:
    """``locale`` of ``<home>/config.json`` (None when absent or unreadable); re-read on change."""
    path = home / "config.json"
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_mtime_ns, st.st_size)
    cached = _config_cache.get(str(path))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    # read the one key directly: core.settings imports modules whose messages use this one
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        value = data.get("locale") if isinstance(data, dict) and isinstance(data.get("locale"), str) else None
    except (OSError, ValueError):  # text must never fail a reply; check_config reports a broken file
        value = None
    _config_cache[str(path)] = (stamp, value)
    return value


def resolve_locale(home: Path | None = None, env: dict[str, str] | None = None) -> str:
    """The locale of this process: ``$TIANSHU_MCP_LOCALE`` > config ``locale`` > ``en``.

    Args:
        home: the data home whose ``config.json`` is read (default ``$TIANSHU_MCP_HOME`` or
            ``~/.tianshu-mcp``).
        env: the environment to read (default ``os.environ``).

    Returns:
        One of :data:`SUPPORTED`. An unknown name gives ``en`` and one WARNING per value.
        Never raises.
    """
    source_env = os.environ if env is None else env
    raw = (source_env.get(LOCALE_ENV) or "").strip()
    source = LOCALE_ENV
    if not raw:
        try:
            raw = (_config_locale(home or _home()) or "").strip()
        except Exception:  # noqa: BLE001
            raw = ""
        source = "config.json locale"
    if not raw:
        return DEFAULT_LOCALE
    found = normalize_locale(raw)
    if found is None:
        _warn_once(source, raw)
        return DEFAULT_LOCALE
    return found


@lru_cache(maxsize=8)
def translations(locale: str) -> _gettext.NullTranslations:
    """The catalogue of ``locale`` (English: the identity). A missing ``.mo`` gives the identity too."""
    if locale == DEFAULT_LOCALE:
        return _gettext.NullTranslations()
    return _gettext.translation(DOMAIN, localedir=str(LOCALE_DIR), languages=[locale], fallback=True)


def _(message: str) -> str:
    """``message`` (a constant English msgid) in the current locale; use ``.format(**named)`` after."""
    return translations(resolve_locale()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for count ``n`` in the current locale (Chinese has one form)."""
    return translations(resolve_locale()).ngettext(singular, plural, n)


def N_(message: str) -> str:  # noqa: N802 - the gettext convention
    """Mark a constant for extraction; translate it later with :func:`_`."""
    return message


__all__ = ["DOMAIN", "LOCALE_DIR", "LOCALE_ENV", "SUPPORTED", "N_", "_", "ngettext", "normalize_locale",
           "resolve_locale", "translations"]
