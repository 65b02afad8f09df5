"""The AI content judge: a user-supplied command that looks at an image (docs/visual.md §6).

The server never holds keys: judgement is delegated to the configured command, run as argv (no
shell) in a project directory, in its own process group, with stdin at EOF, under a per-sample
timeout after which its whole tree is killed. Its verdict is the last non-empty stdout line
(:func:`.content_tally.parse_verdict`); ``samples`` runs are tallied by majority
(:func:`tally`) and, when the judge's identity is known, cached per task.

Inputs are plain JSON mappings with the spec's camelCase keys: ``content`` is the ContentConfig
(``{enabled, command?, argsTemplate?, cwd?, env?, allowRemote, samples, timeoutMs,
minConfidence?, cache}``), ``check`` a ContentCheck or ContentRule
(``{expect, blocking, samples?, allowRemote?, command?, argsTemplate?, cwd?, env?, id?, files?}``).
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...core.files import write_new_bytes
from ...core.procs import run_process, stop_requested
from .content_tally import (
    cache_key,
    env_digest,
    parse_verdict,
    read_cache,
    sha256_hex,
    tally,
    write_cache,
)
from .decode import (
    DEFAULT_DECODED_PIXELS,
    DEFAULT_INPUT_BYTES,
    decode_image,
)
from .errors import VisualError, status_of
from .paths import project_file

__all__ = ["PLACEHOLDERS", "Effective", "check_content", "effective", "preflight", "resolve_env", "tally"]

PLACEHOLDERS = ("<image:path>", "<expect:file>", "<image:base64:file>")
"""The only ``<…>`` tokens an argsTemplate may hold (docs/visual.md §1 rule 3, §6.2)."""

TOKEN_RE = re.compile(r"<[^<>\s]*>")
ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TAIL_CHARS = 262144
"""stdout/stderr are kept as their last this many characters."""
STDERR_IN_MESSAGE = 2000
OUTPUT_LIMIT_BYTES = 32 * 1024 * 1024
"""A judge writing more than this (stdout + stderr, bytes) while running is stopped: a runaway
writer must not fill the disk. Its result is ``CONTENT_OUTPUT_INVALID``."""
POLL_S = 0.05


@dataclass
class Effective:
    """The effective parameters of one content check (docs/visual.md §6.1, §6.2).

    ``command`` as configured; ``command_path`` the resolved absolute executable (None when it
    cannot be resolved); ``command_digest`` the sha256 identity of the executable and of the
    template's file arguments (None when unresolved or unreadable: no caching);
    ``args_template`` the tokens before expansion; ``cwd`` the project-gated real directory;
    ``env`` the declared mapping ``{childName: hostVarName}`` (not yet resolved, see
    :func:`resolve_env`); ``timeout_ms`` per sample (ms); ``min_confidence`` in [0, 1] or None.
    """

    command: str
    command_path: str | None
    command_digest: str | None
    args_template: list[str]
    cwd: Path
    env: dict[str, str]
    allow_remote: bool
    samples: int
    timeout_ms: int
    min_confidence: float | None
    cache: bool


def _config_invalid(message: str) -> VisualError:
    return VisualError("CONTENT_CONFIG_INVALID", message)


def _pick(check: Mapping[str, Any], content: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = check.get(key)
    if value is None:
        value = content.get(key)
    return default if value is None else value


def _int_in(value: Any, name: str, low: int, high: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low or (high is not None and value > high):
        raise _config_invalid(f"Content {name} must be an integer {'>= ' + str(low) if high is None else f'in {low}..{high}'}")
    return value


def _project_dir(project_root: str | os.PathLike[str], rel: Any) -> Path:
    """``rel`` through the project path gate (:func:`.paths.project_file`).

    Raises: VisualError ``PATH_OUTSIDE_PROJECT``; ``CONTENT_CONFIG_INVALID`` when not a non-empty string."""
    if not isinstance(rel, str) or not rel:
        raise _config_invalid("Content cwd must be a non-empty project-relative path")
    return project_file(project_root, rel)


def resolve_command(command: str, cwd: Path) -> str | None:
    """Resolve the judge command (docs/visual.md §6.2): a command with ``/`` or ``\\`` is a path
    relative to ``cwd`` that must be a regular file; otherwise the first ``PATH`` match
    (``shutil.which``). Returns the absolute path, or None when unresolved."""
    if "/" in command or "\\" in command:
        target = cwd / command
        return str(target) if target.is_file() else None
    found = shutil.which(command)
    return os.path.abspath(os.path.join(cwd, found)) if found else None


def _sha256_file(path: str | os.PathLike[str]) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def command_digest(command_path: str | None, args_template: Sequence[str], cwd: Path) -> str | None:
    """``sha256("\\n".join([sha256(executable)] + ["<token>:<sha256(file)>" …]))`` over the template
    tokens without a placeholder that name a regular file relative to ``cwd`` (docs/visual.md §6.2).
    None when the executable is unresolved or unreadable."""
    if command_path is None:
        return None
    try:
        parts = [_sha256_file(command_path)]
    except OSError:
        return None
    for token in args_template:
        if any(p in token for p in PLACEHOLDERS) or "\x00" in token:
            continue
        target = cwd / token
        try:
            if stat.S_ISREG(os.stat(target).st_mode):
                parts.append(f"{token}:{_sha256_file(target)}")
        except (OSError, ValueError):
            continue
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()


def effective(content: Mapping[str, Any], check: Mapping[str, Any], project_root: str | os.PathLike[str], *,
              with_digest: bool = True) -> Effective:
    """The effective parameters of ``check`` under ``content`` (docs/visual.md §6.1) with the command
    resolved and digested (§6.2; ``with_digest=False`` skips hashing, digest None).

    Per-rule keys win over the global ones; ``timeoutMs``, ``minConfidence`` and ``cache`` are
    global only.

    Raises:
        VisualError: ``CONTENT_CONFIG_INVALID`` — effective command or argsTemplate missing or
            malformed, a ``<…>`` token that is not one of :data:`PLACEHOLDERS`,
            ``<image:base64:file>`` without effective ``allowRemote``, bad samples/timeoutMs/
            minConfidence/env mapping; ``PATH_OUTSIDE_PROJECT`` — cwd escapes the project.
    """
    command = _pick(check, content, "command")
    template = _pick(check, content, "argsTemplate")
    if not isinstance(command, str) or not command or "\x00" in command:
        raise _config_invalid("Content checks require an effective command and argsTemplate")
    if (not isinstance(template, (list, tuple)) or not template
            or not all(isinstance(t, str) and t for t in template)):
        raise _config_invalid("Content checks require an effective command and argsTemplate")
    for token in template:
        for match in TOKEN_RE.findall(token):
            if match not in PLACEHOLDERS:
                raise _config_invalid(f"Unknown placeholder in argsTemplate: {match}")
    allow_remote = _pick(check, content, "allowRemote", False)
    if not isinstance(allow_remote, bool):
        raise _config_invalid("Content allowRemote must be a boolean")
    if not allow_remote and any("<image:base64:file>" in t for t in template):
        raise _config_invalid("<image:base64:file> sends the image to the judge; it requires allowRemote: true")
    env = _pick(check, content, "env", {})
    if not isinstance(env, Mapping) or not all(
            isinstance(k, str) and ENV_NAME_RE.match(k) and isinstance(v, str) and v for k, v in env.items()):
        raise _config_invalid("Content env must map child variable names to host variable names")
    samples = _int_in(_pick(check, content, "samples", 3), "samples", 1, 9)
    timeout_ms = _int_in(content.get("timeoutMs", 90000), "timeoutMs", 1, None)
    min_conf = content.get("minConfidence")
    if min_conf is not None and (isinstance(min_conf, bool) or not isinstance(min_conf, (int, float))
                                 or not 0 <= min_conf <= 1):
        raise _config_invalid("Content minConfidence must be a number in [0, 1]")
    cache = content.get("cache", True)
    cwd = _project_dir(project_root, _pick(check, content, "cwd", "."))
    path = resolve_command(command, cwd)
    return Effective(
        command=command, command_path=path,
        command_digest=command_digest(path, template, cwd) if with_digest else None,
        args_template=list(template), cwd=cwd, env=dict(env), allow_remote=allow_remote, samples=samples,
        timeout_ms=timeout_ms, min_confidence=None if min_conf is None else float(min_conf), cache=cache is not False)


def resolve_env(mapping: Mapping[str, str]) -> dict[str, str]:
    """``{childName: os.environ[hostName]}`` (docs/visual.md §6.2).

    Raises: VisualError ``CONTENT_ENV_MISSING`` naming the first host variable that is not set."""
    resolved: dict[str, str] = {}
    for child, host in mapping.items():
        value = os.environ.get(host)
        if value is None:
            raise VisualError("CONTENT_ENV_MISSING", f"Missing environment variable reference: {host} (for {child})")
        resolved[child] = value
    return resolved


def preflight(content: Mapping[str, Any], checks: Sequence[tuple[str, Mapping[str, Any]]],
              project_root: str | os.PathLike[str]) -> None:
    """Round-level content preflight (docs/visual.md §2 step 2): every labelled check must have a
    resolvable command and set host variables. Does nothing when content is not enabled or
    ``checks`` is empty. Labels: a rule's id, or ``<page.id> (page content)``.

    Raises:
        VisualError: ``CONTENT_COMMAND_MISSING`` (``<label>: cannot resolve content judge command
            '<cmd>'``), ``CONTENT_ENV_MISSING`` (``<label>: …``), ``CONTENT_CONFIG_INVALID`` or
            ``PATH_OUTSIDE_PROJECT`` (``<label>: …``) — the round's configuration error.
    """
    if content.get("enabled") is not True or not checks:
        return
    for label, check in checks:
        try:
            eff = effective(content, check, project_root, with_digest=False)
            if eff.command_path is None:
                raise VisualError("CONTENT_COMMAND_MISSING", f"{label}: cannot resolve content judge command '{eff.command}'")
            resolve_env(eff.env)
        except VisualError as exc:
            if exc.message.startswith(f"{label}: "):
                raise
            raise VisualError(exc.code, f"{label}: {exc.message}", exc.kind) from None


# --- evidence ------------------------------------------------------------------------------------

# --- one run of the judge ----------------------------------------------------------------------

@dataclass
class _Run:
    exit_code: int | None = None
    timed_out: bool = False
    cancelled: bool = False
    limited: bool = False
    spawn_error: str | None = None
    stdout: str = ""
    stderr: str = ""


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - TAIL_CHARS * 4))
            return fh.read().decode("utf-8", errors="replace")[-TAIL_CHARS:]
    except OSError:
        return ""


def _run_judge(argv: list[str], executable: str | None, cwd: Path, env: dict[str, str],
               timeout_ms: int, should_stop: Callable[[], bool] | None) -> _Run:
    """Run one sample with :func:`~tianshu_mcp.core.procs.run_process`: own session, stdin at EOF,
    stdout and stderr to separate files in a private temp dir, the tree killed on timeout, stop or
    output flood (and after exit, so nothing lingers)."""
    with tempfile.TemporaryDirectory(prefix="tianshu-judge-") as tmp:
        out, err = Path(tmp) / "stdout", Path(tmp) / "stderr"
        res = run_process([executable or argv[0], *argv[1:]], cwd=cwd, log_path=out, stderr_path=err,
                          timeout_ms=timeout_ms, env=env, should_stop=should_stop, poll_s=POLL_S,
                          max_output_bytes=OUTPUT_LIMIT_BYTES, trailer=False)
        return _Run(exit_code=res.exit_code, timed_out=res.timed_out, cancelled=res.killed, limited=res.output_limited,
                    spawn_error=res.error, stdout=_tail(out), stderr=_tail(err))


def _expand(template: Sequence[str], image: str, expect: str, data: bytes, input_dir: Path, made: list[Path]) -> list[str]:
    """Expand the placeholders inside each token (replace-all on the original token, no
    re-expansion); the input files are written only when used, each listed in ``made`` before it
    is created (the caller deletes them, even after a failure). Returns the expanded tokens."""
    values: dict[str, str] = {}
    uses = "".join(template)
    for placeholder, name, payload in (("<expect:file>", "expect.txt", lambda: expect.encode("utf-8")),
                                       ("<image:base64:file>", "image.b64", lambda: base64.b64encode(data))):
        if placeholder in uses:
            input_dir.mkdir(parents=True, exist_ok=True)
            path = input_dir / name
            path.unlink(missing_ok=True)
            made.append(path)
            write_new_bytes(path, payload())
            values[placeholder] = str(path)
    values["<image:path>"] = image
    pattern = re.compile("|".join(re.escape(p) for p in PLACEHOLDERS))
    return [pattern.sub(lambda m: values[m.group(0)], token) for token in template]


def _sample(eff: Effective, env: dict[str, str], image: str, expect: str, data: bytes, evidence_dir: Path,
            round_deadline: float, should_stop: Callable[[], bool] | None) -> list[dict[str, Any]]:
    """Run ``eff.samples`` samples in turn; the first sample that errors stops sampling.

    Raises: VisualError CANCELLED / ROUND_TIMEOUT / CONTENT_TIMEOUT / CONTENT_COMMAND_FAILED /
    CONTENT_OUTPUT_INVALID."""
    child_env = {**os.environ, **env}  # run_process scrubs our credentials and tags the tree
    input_dir = evidence_dir / "input"
    votes: list[dict[str, Any]] = []
    for index in range(eff.samples):
        _check_running(round_deadline, should_stop)
        remaining_ms = int((round_deadline - time.monotonic()) * 1000)
        timeout_ms = max(1, min(eff.timeout_ms, remaining_ms))
        made: list[Path] = []
        try:
            argv = _expand(eff.args_template, image, expect, data, input_dir, made)
            run = _run_judge([eff.command, *argv], eff.command_path, eff.cwd, child_env, timeout_ms, should_stop)
        finally:
            for path in made:
                path.unlink(missing_ok=True)
            try:
                input_dir.rmdir()
            except OSError:
                pass
        if run.cancelled:
            raise VisualError("CANCELLED", "Visual acceptance cancelled", "cancelled")
        if run.timed_out:
            if timeout_ms < eff.timeout_ms:
                raise VisualError("ROUND_TIMEOUT", "Visual round deadline exceeded")
            raise VisualError("CONTENT_TIMEOUT", f"Judge command timed out after {eff.timeout_ms}ms")
        if run.spawn_error is not None:
            raise VisualError("CONTENT_COMMAND_FAILED", f"Judge command failed to start: {run.spawn_error}")
        if run.limited:
            raise VisualError("CONTENT_OUTPUT_INVALID", f"Judge command wrote more than {OUTPUT_LIMIT_BYTES} bytes; it was stopped")
        if run.exit_code != 0:
            raise VisualError("CONTENT_COMMAND_FAILED",
                              f"Judge command exited with {run.exit_code}: {run.stderr[-STDERR_IN_MESSAGE:]}")
        votes.append({"index": index, **parse_verdict(run.stdout)})
    return votes


def _check_running(round_deadline: float, should_stop: Callable[[], bool] | None) -> None:
    if stop_requested(should_stop):
        raise VisualError("CANCELLED", "Visual acceptance cancelled", "cancelled")
    if time.monotonic() >= round_deadline:
        raise VisualError("ROUND_TIMEOUT", "Visual round deadline exceeded")


# --- the item ----------------------------------------------------------------------------------

def check_content(*, result_id: str, target: str, image: str | os.PathLike[str], check: Mapping[str, Any],
                  content: Mapping[str, Any], project_root: str | os.PathLike[str], evidence_dir: str | os.PathLike[str],
                  task_dir: str | os.PathLike[str], round_deadline: float, should_stop: Callable[[], bool] | None = None,
                  optional: bool, viewport: str | None = None, input_bytes: int = DEFAULT_INPUT_BYTES,
                  decoded_pixels: int = DEFAULT_DECODED_PIXELS,
                  write_artifact: Callable[[Path, bytes], None] | None = None) -> dict[str, Any]:
    """Judge one image against ``check["expect"]`` (docs/visual.md §6.3) and return its VisualResult.

    Args:
        image: the image file (a project file already through the path gate, or a capture).
        evidence_dir: where ``source.png`` (the image's raw bytes) is written; the transient
            ``input/`` files live there only while a sample runs.
        task_dir: holds the per-task cache ``visual-content-cache/<key>.json``.
        round_deadline: ``time.monotonic()`` seconds; a sample's timeout is
            ``min(timeoutMs, remaining round budget)``.
        should_stop: cancellation probe, polled while the judge runs (the tree is killed).
        optional: ``not check.blocking`` as the engine decided it.
        input_bytes / decoded_pixels: the ``limits`` budgets for decoding (bytes, pixels).
        write_artifact: writes ``source.png`` (default: exclusive create); the engine may pass its
            budgeted writer (raising ``ARTIFACT_BUDGET``).

    Returns:
        ``{id, kind: "content", target, viewport?, status, optional, code, message, durationMs,
        repairable, rules, artifacts?: {source}, content?: {provider, expect, cacheKey, cached,
        votes, confidence?, confidenceGate}, metrics?: {samples, passedVotes, failedVotes,
        invalidVotes, confidenceGate, cached}}``. Status passed/failed/uncertain from the tally;
        errors become results: blocked (``CONTENT_TIMEOUT``, ``CONTENT_COMMAND_FAILED``,
        ``CONTENT_OUTPUT_INVALID``, ``CONTENT_CONFIG_INVALID``, ``CONTENT_ENV_MISSING``,
        ``ROUND_TIMEOUT``, budgets; ``VISUAL_INTERNAL`` for anything unexpected), failed for a
        broken image (``IMAGE_CORRUPT`` …), skipped ``CANCELLED``. Never raises.
    """
    started = time.monotonic()
    result: dict[str, Any] = {"id": result_id, "kind": "content", "target": target}
    if viewport is not None:
        result["viewport"] = viewport
    result.update({"status": "passed", "optional": optional, "code": "CONTENT_MATCH",
                   "message": "Content matches the declared expectation", "durationMs": 0, "repairable": False,
                   "rules": {k: v for k, v in check.items() if v is not None}})
    try:
        _check_running(round_deadline, should_stop)
        image_path = Path(os.path.abspath(image))
        data = decode_image(image_path, input_bytes=input_bytes, decoded_pixels=decoded_pixels,
                            deadline=round_deadline).data
        image_sha = sha256_hex(data)
        source = Path(evidence_dir) / "source.png"
        try:
            (write_artifact or write_new_bytes)(source, data)
        except FileExistsError:
            raise VisualError("VISUAL_INTERNAL", f"Evidence already exists: {source}") from None
        result["artifacts"] = {"source": str(source)}
        eff = effective(content, check, project_root)
        env_values = resolve_env(eff.env)
        expect = str(check.get("expect", ""))
        key = cache_key({
            "imageSha256": image_sha, "expect": expect, "command": eff.command, "commandPath": eff.command_path,
            "commandDigest": eff.command_digest, "argsTemplate": eff.args_template, "cwd": str(eff.cwd),
            "envDigest": env_digest(env_values), "allowRemote": eff.allow_remote, "samples": eff.samples,
            "minConfidence": eff.min_confidence})
        votes = read_cache(task_dir, key) if eff.cache else None
        cached = votes is not None
        if votes is None:
            votes = _sample(eff, env_values, str(image_path), expect, data, Path(evidence_dir), round_deadline, should_stop)
        outcome = tally(votes, eff.samples, eff.min_confidence)
        if not cached and eff.cache and eff.command_digest:
            write_cache(task_dir, key, image_sha256=image_sha, expect=expect, outcome=outcome, votes=votes,
                        duration_ms=int((time.monotonic() - started) * 1000))
        detail: dict[str, Any] = {"provider": eff.command, "expect": expect, "cacheKey": key, "cached": cached,
                                  "votes": votes}
        if "confidence" in outcome:
            detail["confidence"] = outcome["confidence"]
        detail["confidenceGate"] = outcome["confidenceGate"]
        result.update({
            "status": outcome["status"], "code": outcome["code"], "message": outcome["reason"],
            "repairable": outcome["status"] == "failed", "content": detail,
            "metrics": {"samples": eff.samples, "passedVotes": outcome["passedVotes"],
                        "failedVotes": outcome["failedVotes"], "invalidVotes": outcome["invalidVotes"],
                        "confidenceGate": outcome["confidenceGate"], "cached": cached},
        })
    except VisualError as exc:
        result.update({"status": status_of(exc.kind), "code": exc.code, "message": exc.message,
                       "repairable": exc.kind == "failed"})
    except Exception as exc:  # noqa: BLE001 - an item never crashes the round
        result.update({"status": "blocked", "code": "VISUAL_INTERNAL", "message": f"{type(exc).__name__}: {exc}",
                       "repairable": False})
    result["durationMs"] = int((time.monotonic() - started) * 1000)
    return result

