"""The content judge's votes: parsed, tallied, cached (docs/visual.md §6.2 verdict contract, §6.3
cache, §6.4 majority vote).

:func:`parse_verdict` reads the judge's stdout, :func:`tally` turns the collected votes into a
status (pure functions); :func:`cache_key`, :func:`read_cache` and :func:`write_cache` keep a
finished judgement per task in ``<taskDir>/visual-content-cache/<key>.json``. :mod:`.content`
runs the judge and re-exports :func:`tally`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...core.files import atomic_write_json, read_json_safe
from .errors import VisualError

VERDICT_KEYS = frozenset({"passed", "confidence", "reason"})
"""The only keys a verdict object may carry."""

CACHEABLE_STATUSES = frozenset({"passed", "failed", "uncertain"})
"""Statuses a finished judgement can have (only these are cached, docs/visual.md §6.3 step 5)."""
CACHE_DIR = "visual-content-cache"
CACHE_SCHEMA = 1


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ValueError(f"duplicate key {key!r}")
        seen[key] = value
    return seen


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _invalid(message: str) -> VisualError:
    return VisualError("CONTENT_OUTPUT_INVALID", message)


def parse_verdict(stdout: str) -> dict[str, Any]:
    """Parse the judge's verdict: the last non-empty line of ``stdout`` (docs/visual.md §6.2).

    The line must be a strict JSON object ``{passed: bool, confidence?: number in [0, 1],
    reason: non-blank str}``: no other keys, no duplicate keys, no ``NaN``/``Infinity``,
    ``confidence`` not a bool and not ``null``.

    Returns:
        ``{"passed": bool, "reason": str}`` plus ``"confidence": float`` when given.

    Raises:
        VisualError: ``CONTENT_OUTPUT_INVALID`` (blocked) for empty stdout, a last line that is
            not JSON, or a JSON value that breaks the contract (wrong types, missing or blank
            reason, extra keys).
    """
    lines = [line.strip() for line in re.split(r"\r?\n", stdout)]
    lines = [line for line in lines if line]
    if not lines:
        raise _invalid("Judge command produced no stdout")
    last = lines[-1]
    try:
        value = json.loads(last, object_pairs_hook=_no_duplicates, parse_constant=_no_constant)
    except ValueError:
        raise _invalid(f"Judge command stdout last line is not JSON: {last[:200]}") from None
    if not isinstance(value, dict):
        raise _invalid(f"Judge command verdict is not a JSON object: {last[:200]}")
    problems: list[str] = []
    extra = sorted(set(value) - VERDICT_KEYS)
    if extra:
        problems.append(f"unexpected keys {extra}")
    if not isinstance(value.get("passed"), bool):
        problems.append("'passed' must be true or false")
    reason = value.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        problems.append("'reason' must be a non-empty string")
    if "confidence" in value:
        conf = value["confidence"]
        if isinstance(conf, bool) or not isinstance(conf, (int, float)) or not math.isfinite(conf) or not 0 <= conf <= 1:
            problems.append("'confidence' must be a number in [0, 1]")
    if problems:
        raise _invalid(f"Judge command stdout violates the verdict contract: {'; '.join(problems)}")
    verdict: dict[str, Any] = {"passed": value["passed"], "reason": reason}
    if "confidence" in value:
        verdict["confidence"] = float(value["confidence"])
    return verdict


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def tally(votes: Sequence[Mapping[str, Any]], samples: int, min_confidence: float | None) -> dict[str, Any]:
    """Majority vote over the judge's votes with the optional confidence gate (docs/visual.md §6.4).

    Args:
        votes: ``{index, passed, confidence?, reason}`` mappings; ``passed`` True counts for,
            False against, anything else (a stored vote from a cache) as invalid.
        samples: the configured number of samples (the majority is ``> samples / 2``, so votes
            not taken because sampling stopped count as neither side).
        min_confidence: the gate threshold in [0, 1], or None (gate off).

    Returns:
        ``{status: passed|failed|uncertain, code: CONTENT_MATCH|CONTENT_MISMATCH|CONTENT_UNCERTAIN,
        reason, passedVotes, failedVotes, invalidVotes, confidence? (mean of the reported
        confidences, 3 decimals), confidenceGate: off|no-confidence|downgraded|applied}``.
        ``downgraded`` turns a passed or failed verdict into ``CONTENT_UNCERTAIN`` with the reason
        suffixed `` (mean confidence <c> below configured <min>)``.
    """
    passed = [v for v in votes if v.get("passed") is True]
    failed = [v for v in votes if v.get("passed") is False]
    invalid = len(votes) - len(passed) - len(failed)
    reported = [float(v["confidence"]) for v in votes if _number(v.get("confidence"))]
    confidence = round(sum(reported) / len(reported), 3) if reported else None

    def first_reason(side: list[Mapping[str, Any]], fallback: str) -> str:
        reason = side[0].get("reason") if side else None
        return reason if isinstance(reason, str) and reason else fallback

    if len(passed) > samples / 2:
        status, code = "passed", "CONTENT_MATCH"
        reason = first_reason(passed, "Majority of samples satisfied the expectation")
    elif len(failed) > samples / 2:
        status, code = "failed", "CONTENT_MISMATCH"
        reason = first_reason(failed, "Majority of samples did not satisfy the expectation")
    else:
        status, code = "uncertain", "CONTENT_UNCERTAIN"
        reason = (f"Votes are not conclusive: {len(passed)} passed, {len(failed)} failed, "
                  f"{invalid} undecided out of {samples} samples")

    gate = "off"
    if min_confidence is not None:
        if confidence is None:
            gate = "no-confidence"
        elif confidence < min_confidence:
            gate = "downgraded"
            if status != "uncertain":
                status, code = "uncertain", "CONTENT_UNCERTAIN"
                reason = f"{reason} (mean confidence {_fmt(confidence)} below configured {_fmt(min_confidence)})"
        else:
            gate = "applied"
    out: dict[str, Any] = {
        "status": status, "code": code, "reason": reason,
        "passedVotes": len(passed), "failedVotes": len(failed), "invalidVotes": invalid,
        "confidenceGate": gate,
    }
    if confidence is not None:
        out["confidence"] = confidence
    return out


def _fmt(value: float) -> str:
    """A number as JavaScript prints it (``0.5``, ``1``), so reasons read the same as the original's."""
    return str(int(value)) if float(value).is_integer() else repr(float(value))


# --- the per-task cache (docs/visual.md §6.3 steps 2, 3, 5) ---------------------------------------

def sha256_hex(data: bytes | str) -> str:
    """Lowercase hex sha256 of ``data`` (str as UTF-8)."""
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def cache_key(parts: Mapping[str, Any]) -> str:
    """sha256 of the canonical (sorted keys, compact) JSON of ``{v: 1, **parts}``; ``parts`` are
    ``imageSha256, expect, command, commandPath, commandDigest, argsTemplate, cwd, envDigest,
    allowRemote, samples, minConfidence?`` (a None ``minConfidence`` is left out)."""
    key = {"v": CACHE_SCHEMA, **{k: v for k, v in parts.items() if not (k == "minConfidence" and v is None)}}
    return sha256_hex(_canonical(key))


def env_digest(values: Mapping[str, str]) -> str:
    """sha256 of the resolved child variables' canonical JSON (their values are never stored)."""
    return sha256_hex(_canonical(dict(values)))


def cache_file(task_dir: str | os.PathLike[str], key: str) -> Path:
    """``<task_dir>/visual-content-cache/<key>.json``."""
    return Path(task_dir) / CACHE_DIR / f"{key}.json"


def read_cache(task_dir: str | os.PathLike[str], key: str) -> list[dict[str, Any]] | None:
    """The stored votes for ``key``, or None (a miss) when the entry is absent, unreadable, of
    another schemaVersion or key, of a status that is not cacheable, or malformed."""
    entry = read_json_safe(cache_file(task_dir, key))
    if (not isinstance(entry, dict) or entry.get("schemaVersion") != CACHE_SCHEMA or entry.get("key") != key
            or entry.get("status") not in CACHEABLE_STATUSES or not isinstance(entry.get("votes"), list)
            or not all(isinstance(v, dict) for v in entry["votes"])):
        return None
    return entry["votes"]


def write_cache(task_dir: str | os.PathLike[str], key: str, *, image_sha256: str, expect: str,
                outcome: Mapping[str, Any], votes: Sequence[Mapping[str, Any]], duration_ms: int) -> bool:
    """Store a finished judgement atomically: ``{schemaVersion: 1, key, imageSha256,
    expectDigest, status, code, votes, confidence?, createdAt, durationMs}``. Only a status in
    :data:`CACHEABLE_STATUSES` is stored. Returns True when written; a write failure returns
    False (it only costs a re-judgement later), never raises OSError."""
    if outcome.get("status") not in CACHEABLE_STATUSES:
        return False
    entry: dict[str, Any] = {
        "schemaVersion": CACHE_SCHEMA, "key": key, "imageSha256": image_sha256, "expectDigest": sha256_hex(expect),
        "status": outcome["status"], "code": outcome["code"], "votes": [dict(v) for v in votes],
    }
    if "confidence" in outcome:
        entry["confidence"] = outcome["confidence"]
    entry["createdAt"] = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    entry["durationMs"] = duration_ms
    try:
        atomic_write_json(cache_file(task_dir, key), entry)
    except OSError:
        return False
    return True
