"""Value rules, value types and error paths of the ``visual`` config block (docs/visual.md §1).

Value rules (``check_*``) take a decoded JSON string and return it unchanged or raise ``ValueError``
with an English reason; the annotated value types (``Id``, ``ProjectPath``, ``LocalUrl``, ``Ratio``,
``Opt[T]`` …) bind them to the matching JSON Schema fragments (``*_SCHEMA``) so the published schema
rejects what the models of :mod:`.config` reject.
:func:`error_path` turns a pydantic error location into a JSON path; :class:`NoNullSchema` publishes
optional keys without a ``null`` branch. The cross-field rules 1–8 live in :mod:`.config_crossfield`.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Annotated, Any, Literal, Mapping, Optional, TypeVar, Union
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, GetCoreSchemaHandler, GetJsonSchemaHandler, WithJsonSchema
from pydantic.json_schema import GenerateJsonSchema
from pydantic_core import CoreSchema, core_schema

# --------------------------------------------------------------------------------------------
# Value rules
# --------------------------------------------------------------------------------------------

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]*$"
ID_MAX = 100
_RESERVED = ("con", "prn", "aux", "nul", "com[1-9]", "lpt[1-9]")
_RESERVED_RE = re.compile(r"(?:con|prn|aux|nul|com[1-9]|lpt[1-9])", re.I)


def _ci(word: str) -> str:
    """A case-insensitive ECMA-262 pattern for ``word`` (JSON Schema has no inline flags)."""
    return "".join(part if part.startswith("[") else "".join(f"[{c.upper()}{c.lower()}]" for c in part)
                   for part in re.split(r"(\[1-9\])", word) if part)


ID_SCHEMA: dict[str, Any] = {
    "type": "string", "pattern": ID_PATTERN, "maxLength": ID_MAX,
    "not": {"pattern": "^(?:" + "|".join(_ci(w) for w in _RESERVED) + ")$"},
    "description": "letters, digits, '_' and '-' (first a letter or digit), at most 100; not a Windows "
                   "reserved name (con, prn, aux, nul, com1-9, lpt1-9)",
}


def check_id(value: str) -> str:
    """An id: ``^[A-Za-z0-9][A-Za-z0-9_-]*$``, ≤ 100 chars, not a Windows reserved name (§1)."""
    if len(value) > ID_MAX:
        raise ValueError(f"id must be at most {ID_MAX} characters")
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", value):
        raise ValueError("id must start with a letter or digit and contain only letters, digits, '_' and '-'")
    if _RESERVED_RE.fullmatch(value):
        raise ValueError(f"id '{value}' is a reserved Windows file name")
    return value


PATH_SCHEMA: dict[str, Any] = {
    "type": "string", "minLength": 1,
    "pattern": r"^(?![A-Za-z]:)(?![\\/])(?![\s\S]*(?:^|[\\/])\.\.(?:[\\/]|$))[^\x00]+$",
    "description": "project-relative path: no drive letter, no leading '/' or '\\', no '..' segment",
}
PNG_PATH_SCHEMA: dict[str, Any] = {
    **PATH_SCHEMA, "allOf": [{"pattern": r"\.[Pp][Nn][Gg]$"}],
    "description": "project-relative path of a .png file (case-insensitive extension)",
}


def _no_surrogates(value: str, what: str) -> None:
    if any("\ud800" <= c <= "\udfff" for c in value):
        raise ValueError(f"{what} must be valid Unicode (lone surrogate)")


def check_project_path(value: str) -> str:
    """A projectRelativePath (§1): non-empty; no ``X:``, ``/`` or ``\\`` prefix; no ``..`` segment
    (split on ``/`` and ``\\``); no NUL (port: nor a lone surrogate, which no file system accepts)."""
    if not value:
        raise ValueError("path must not be empty")
    if "\0" in value:
        raise ValueError("path must not contain NUL")
    _no_surrogates(value, "path")
    if re.match(r"[A-Za-z]:|[\\/]", value):
        raise ValueError("path must be relative to the project (no drive letter, no leading '/' or '\\')")
    if ".." in re.split(r"[\\/]", value):
        raise ValueError("path must not contain a '..' segment")
    return value


def check_png_path(value: str) -> str:
    """A projectRelativePath ending ``.png`` (case-insensitive): ``page.baseline`` (§1)."""
    check_project_path(value)
    if not value.lower().endswith(".png"):
        raise ValueError("baseline must be a .png file")
    return value


_LOCAL_NETLOC = re.compile(r"(?:localhost|127\.0\.0\.1|\[::1\])(?::([0-9]{1,5}))?", re.I)
LOCAL_URL_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[Hh][Tt][Tt][Pp][Ss]?://(?:[Ll][Oo][Cc][Aa][Ll][Hh][Oo][Ss][Tt]|127\.0\.0\.1|\[::1\])"
               r"(?::[0-9]{1,5})?(?:[/?#][^\s\\]*)?$",
    "description": "http(s) URL on localhost, 127.0.0.1 or [::1], without credentials",
}


def check_local_url(value: str) -> str:
    """A localUrl (§1): http/https, host exactly ``localhost``, ``127.0.0.1`` or ``[::1]``, no
    credentials, port ≤ 65535 (port: no whitespace, control characters or backslashes either)."""
    if not value or any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in value) or "\\" in value:
        raise ValueError("must be a URL without whitespace, control characters or backslashes")
    _no_surrogates(value, "URL")
    try:
        parts = urlsplit(value)
    except ValueError as exc:
        raise ValueError(f"is not a valid URL ({exc})") from None
    if parts.scheme.lower() not in ("http", "https") or not value.lower().startswith(parts.scheme.lower() + "://"):
        raise ValueError("must be an http:// or https:// URL")
    if "@" in parts.netloc:
        raise ValueError("must not carry credentials")
    m = _LOCAL_NETLOC.fullmatch(parts.netloc)
    if m is None:
        raise ValueError("host must be exactly localhost, 127.0.0.1 or [::1]")
    if m.group(1) is not None and int(m.group(1)) > 65535:
        raise ValueError("port must be at most 65535")
    return value


ORIGIN_SCHEMA: dict[str, Any] = {
    "type": "string", "pattern": r"^(?:https?|wss?)://[a-z0-9_.\-\[\]:]+$",
    "description": "an exact serialized origin: scheme (http, https, ws, wss) and host[:port], no path, "
                   "no trailing slash, lowercase, default port omitted",
}
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def check_origin(value: str) -> str:
    """An allowedOrigins entry (§1): http/https/ws/wss URL whose serialized origin equals the
    string exactly (lowercase scheme and host, default port omitted, no path/query/fragment)."""
    m = re.fullmatch(r"(https?|wss?)://([a-z0-9_.\-]+|\[[0-9a-f:.]+\])(?::([0-9]{1,5}))?", value)
    if m is None:
        raise ValueError("must be an exact origin like http://localhost:3000 (lowercase scheme and host, "
                         "no path, no trailing slash, no credentials)")
    scheme, host, port = m.group(1), m.group(2), m.group(3)
    if host.startswith("["):
        try:
            canon = "[" + ipaddress.IPv6Address(host[1:-1]).compressed + "]"
        except ValueError:
            raise ValueError("has an invalid IPv6 address") from None
        if canon != host:
            raise ValueError(f"is not in serialized form (expected host {canon})")
    else:
        labels = host.rstrip(".").split(".")
        if not all(labels):
            raise ValueError("has an empty host label")
        if re.fullmatch(r"[0-9]+|0[xX][0-9a-fA-F]*", labels[-1]):
            try:
                canon = str(ipaddress.IPv4Address(host))
            except ValueError:
                raise ValueError("has an invalid IPv4 address") from None
            if canon != host:
                raise ValueError(f"is not in serialized form (expected host {canon})")
    if port is not None:
        if port != str(int(port)) or int(port) > 65535:
            raise ValueError("has an invalid port")
        if int(port) == _DEFAULT_PORTS[scheme]:
            raise ValueError(f"must omit the default port {port}")
    return value


ROUTE_SCHEMA: dict[str, Any] = {
    "type": "string", "pattern": r"^/(?!/)[^\\]*$",
    "description": "path on the page's service: starts with '/', not '//', no backslash",
}


def check_route(value: str) -> str:
    """A page route (§1): starts with ``/``, not ``//``, no ``\\``."""
    if not value.startswith("/") or value.startswith("//") or "\\" in value:
        raise ValueError("route must start with '/' (not '//') and contain no backslash")
    return value


SELECTOR_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1, "pattern": r"\S",
                                   "description": "CSS selector (Playwright syntax)"}


def check_selector(value: str) -> str:
    """A selector: non-empty and not only whitespace (port: §1 says min length 1)."""
    if not value.strip():
        raise ValueError("selector must not be empty")
    return value


ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"

_ALPHA, _ALNUM = "[A-Za-z]", "[A-Za-z0-9]"
LOCALE_PATTERN = (
    f"^(?:{_ALPHA}{{2,3}}|{_ALPHA}{{5,8}})(?:-{_ALPHA}{{4}})?(?:-(?:{_ALPHA}{{2}}|[0-9]{{3}}))?"
    f"(?:-(?:{_ALNUM}{{5,8}}|[0-9]{_ALNUM}{{3}}))*(?:-[0-9A-WY-Za-wy-z](?:-{_ALNUM}{{2,8}})+)*"
    f"(?:-[Xx](?:-{_ALNUM}{{1,8}})+)?$"
)
LOCALE_SCHEMA: dict[str, Any] = {"type": "string", "pattern": LOCALE_PATTERN, "maxLength": 100,
                                 "description": "BCP-47 language tag, e.g. en-US, zh-Hans-CN"}


def check_locale(value: str) -> str:
    """A BCP-47 (Unicode locale id) language tag such as ``en-US`` or ``zh-Hans-CN`` (§1 defaults)."""
    if len(value) > 100 or not re.fullmatch(LOCALE_PATTERN[1:-1], value):
        raise ValueError(f"'{value[:100]}' is not a valid BCP-47 language tag (e.g. en-US)")
    return value


@lru_cache(maxsize=1)
def _zones() -> frozenset[str]:
    import zoneinfo

    return frozenset(zoneinfo.available_timezones()) | {"UTC"}


TIMEZONE_SCHEMA: dict[str, Any] = {"type": "string", "minLength": 1,
                                   "description": "IANA time zone name, e.g. UTC, Europe/Berlin"}


def check_timezone(value: str) -> str:
    """An IANA time zone name known to :func:`zoneinfo.available_timezones` (§1 defaults)."""
    if value not in _zones():
        raise ValueError(f"'{value[:100]}' is not an IANA time zone name (e.g. UTC, Europe/Berlin)")
    return value


# --------------------------------------------------------------------------------------------
# Content placeholders (rule 3)
# --------------------------------------------------------------------------------------------

PLACEHOLDERS = ("<image:path>", "<expect:file>", "<image:base64:file>")
"""The only ``<…>`` tokens an ``argsTemplate`` may contain (docs/visual.md §1 rule 3, §6.2)."""
TOKEN_RE = re.compile(r"<[^<>\s]*>")
TEMPLATE_ITEM_SCHEMA: dict[str, Any] = {
    "type": "string", "minLength": 1,
    "pattern": r"^(?:[^<]|<(?![^<>\s]*>)|<image:path>|<expect:file>|<image:base64:file>)*$",
    "description": "argv token; placeholders <image:path>, <expect:file>, <image:base64:file>",
}


def unknown_placeholders(token: str) -> list[str]:
    """The ``<…>`` tokens of one template item that are not in :data:`PLACEHOLDERS`."""
    return [m for m in TOKEN_RE.findall(token) if m not in PLACEHOLDERS]


# --------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------

T = TypeVar("T")


def _not_null(value: Any) -> Any:
    if value is None:
        raise ValueError("must not be null (omit the key instead)")
    return value


Opt = Annotated[Optional[T], BeforeValidator(_not_null)]
"""An optional key: may be omitted (None), never JSON ``null``."""


def _plain(value: str) -> str:
    if not value:
        raise ValueError("must not be empty")
    return _no_nul(value)


def _no_nul(value: str) -> str:
    if "\0" in value:
        raise ValueError("must not contain NUL")
    return value


Id = Annotated[str, AfterValidator(check_id), WithJsonSchema(ID_SCHEMA)]
ProjectPath = Annotated[str, AfterValidator(check_project_path), WithJsonSchema(PATH_SCHEMA)]
PngPath = Annotated[str, AfterValidator(check_png_path), WithJsonSchema(PNG_PATH_SCHEMA)]
LocalUrl = Annotated[str, AfterValidator(check_local_url), WithJsonSchema(LOCAL_URL_SCHEMA)]
Origin = Annotated[str, AfterValidator(check_origin), WithJsonSchema(ORIGIN_SCHEMA)]
Route = Annotated[str, AfterValidator(check_route), WithJsonSchema(ROUTE_SCHEMA)]
Selector = Annotated[str, AfterValidator(check_selector), WithJsonSchema(SELECTOR_SCHEMA)]
Locale = Annotated[str, AfterValidator(check_locale), WithJsonSchema(LOCALE_SCHEMA)]
Timezone = Annotated[str, AfterValidator(check_timezone), WithJsonSchema(TIMEZONE_SCHEMA)]
Text = Annotated[str, AfterValidator(_plain),
                 WithJsonSchema({"type": "string", "minLength": 1, "pattern": "^[^\\x00]+$"})]
Arg = Annotated[str, AfterValidator(_no_nul), WithJsonSchema({"type": "string", "pattern": "^[^\\x00]*$"})]
EnvName = Annotated[str, Field(pattern=ENV_NAME_PATTERN)]
TemplateItem = Annotated[str, Field(min_length=1), WithJsonSchema(TEMPLATE_ITEM_SCHEMA)]
ArgsTemplate = Annotated[list[TemplateItem], Field(min_length=1)]
EnvRef = dict[EnvName, Annotated[str, Field(min_length=1)]]
Capture = Literal["viewport", "fullPage", "element"]


@dataclass(frozen=True)
class JsonNumber:
    """Annotation of a JSON number: finite, never a bool; integral floats become ints (JSON has one
    number type), other floats are refused when ``integer``; bounds ``gt``/``ge``/``le`` are checked
    and published in the JSON Schema. ``desc`` completes the error "must be <desc>"."""

    desc: str
    integer: bool = False
    gt: float | None = None
    ge: float | None = None
    le: float | None = None

    def check(self, value: Any) -> Any:
        bad = ValueError(f"must be {self.desc}")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad
        if isinstance(value, float):
            if not math.isfinite(value):
                raise bad
            if value.is_integer():
                value = int(value)
            elif self.integer:
                raise bad
        gt, ge, le = self.gt, self.ge, self.le
        if (gt is not None and not value > gt) or (ge is not None and value < ge) or (le is not None and value > le):
            raise bad
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_before_validator_function(self.check, handler(source))

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "integer" if self.integer else "number"}
        for key, bound in (("exclusiveMinimum", self.gt), ("minimum", self.ge), ("maximum", self.le)):
            if bound is not None:
                out[key] = bound
        return out


Number = Union[int, float]
Positive = Annotated[Number, JsonNumber("a finite number > 0", gt=0)]
Ratio = Annotated[Number, JsonNumber("a number in [0, 1]", ge=0, le=1)]
Coordinate = Annotated[Number, JsonNumber("a finite number")]
PosInt = Annotated[int, JsonNumber("an integer > 0", integer=True, gt=0)]
Samples = Annotated[int, JsonNumber("an integer in 1..9", integer=True, ge=1, le=9)]


# --------------------------------------------------------------------------------------------
# Error paths and the JSON Schema generator
# --------------------------------------------------------------------------------------------

_UNIONS = {"browser": "mode", "source": "type"}
ERROR_MESSAGES = {"extra_forbidden": "unknown key (not allowed here)", "missing": "required key is missing"}
"""English reasons for some pydantic error types (others keep pydantic's message)."""


def error_path(data: Any, loc: tuple[Any, ...]) -> str:
    """The JSON path (``visual.pages[0].source.readyUrl``) of a pydantic error ``loc`` over the input
    ``data``: list indexes in brackets, discriminator tags of browser/source/steps skipped."""
    out, cur, tag_key = "visual", data, None
    for part in loc:
        if tag_key is not None and isinstance(cur, Mapping) and part == cur.get(tag_key):
            tag_key = None
            continue
        tag_key = None
        if isinstance(part, int):
            out += f"[{part}]"
            cur = cur[part] if isinstance(cur, list) and 0 <= part < len(cur) else None
            if out.endswith(f"steps[{part}]"):
                tag_key = "type"
        elif part == "[key]":
            continue
        else:
            out += f".{part}" if re.fullmatch(r"[A-Za-z_$][\w$]*", str(part)) else f"[{json.dumps(str(part))}]"
            cur = cur.get(part) if isinstance(cur, Mapping) else None
            tag_key = _UNIONS.get(str(part))
    return out


class NoNullSchema(GenerateJsonSchema):
    """Optional keys are omitted, never ``null``: drop the null branch and the ``default: null``."""

    def nullable_schema(self, schema: Any) -> Any:
        return self.generate_inner(schema["schema"])

    def default_schema(self, schema: Any) -> Any:
        if schema.get("default", 0) is None:
            return self.generate_inner(schema["schema"])
        return super().default_schema(schema)
