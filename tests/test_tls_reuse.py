"""One TLS context for every Prefect client of a process (hosting/tls_reuse.py; design note 62).

Run in a fresh interpreter each: the change is to Prefect's client module, process-wide."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r'''
import json, ssl, sys
calls = []
real = ssl.create_default_context
def counting(*args, **kwargs):
    calls.append(kwargs)
    return real(*args, **kwargs)
ssl.create_default_context = counting

from prefect.client.orchestration import PrefectClient, SyncPrefectClient
from prefect.settings import PREFECT_API_SSL_CERT_FILE
from tianshu_mcp.hosting.tls_reuse import share_client_tls_context

del calls[:]  # what importing made
applied = share_client_tls_context()
ahead = len(calls)
clients = [PrefectClient("http://127.0.0.1:9/api"), SyncPrefectClient("http://127.0.0.1:9/api"),
           PrefectClient("https://prefect.invalid/api")]
from prefect.client import orchestration
ctx = orchestration.ssl.create_default_context(cafile=calls[0]["cafile"]) if calls else None
import certifi
print(json.dumps({"applied": applied, "ahead": ahead, "after": len(calls), "cafile": [c.get("cafile") for c in calls],
                  "expected": PREFECT_API_SSL_CERT_FILE.value() or certifi.where(), "verify": ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED,
                  "hostname": ctx is not None and ctx.check_hostname, "again": share_client_tls_context()}))
'''


def _probe(env: dict[str, str] | None = None) -> dict:
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_prefect_clients_share_one_verified_context_built_ahead() -> None:
    """The context is built once, before any client; three clients (async, sync, an https
    API) build none of their own, and it is the verified context Prefect would have built."""
    out = _probe()
    assert out["applied"] and out["again"]
    assert (out["ahead"], out["after"]) == (1, 1), out
    assert out["cafile"] == [out["expected"]] and out["verify"] and out["hostname"], out


def test_the_configured_certificate_file_is_the_one_loaded(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import os

    import certifi

    bundle = tmp_path / "ca.pem"
    bundle.write_bytes(open(certifi.where(), "rb").read())
    out = _probe({**os.environ, "PREFECT_API_SSL_CERT_FILE": str(bundle)})
    assert out["cafile"] == [str(bundle)] and out["after"] == 1, out
