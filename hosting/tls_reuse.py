"""One TLS context for every Prefect client of a process (docs/design-notes.md, note 62).

Prefect 3.9's ``PrefectClient`` and ``SyncPrefectClient`` build a new SSL context in their
constructor, even when the API is plain ``http://``. Building it loads certifi's bundle of about
140 certificates, which measured 30 ms per client. A forked flow-run engine builds two clients
before its flow starts, and the fork server starts one engine per flow run.

:func:`share_client_tls_context` makes the client module's ``ssl.create_default_context``
return one context per argument set, built once. The fork server calls it before it forks, so
every engine inherits a context that is already built. The context is the one Prefect would have
built: the same certificate file, verification and hostname checks. Prefect only reads the
context, except in the insecure branch, which sets the same two fields to the same values on
every call. Sharing one ``SSLContext`` between connections is how ``ssl`` is meant to be used.
"""

from __future__ import annotations

import functools
import logging
import ssl
import types
from typing import Any

__all__ = ["share_client_tls_context"]

log = logging.getLogger("tianshu_mcp")


def share_client_tls_context() -> bool:
    """Give ``prefect.client.orchestration`` an ``ssl`` whose ``create_default_context`` is
    cached per argument set, and build the context its clients will ask for now (this
    process's Prefect settings: ``PREFECT_API_SSL_CERT_FILE``, else certifi's bundle).

    Returns:
        True when the clients now share it; False when this Prefect's client module does not
        build its contexts through a module-level ``ssl`` (then nothing was changed).
    """
    try:
        from prefect.client import orchestration
    except ImportError:
        return False
    current = getattr(orchestration, "ssl", None)
    if isinstance(current, _SharedSSL):
        return True
    if current is not ssl:
        return False
    orchestration.ssl = _SharedSSL()  # type: ignore[attr-defined]
    try:
        import certifi
        from prefect.settings import PREFECT_API_SSL_CERT_FILE, PREFECT_API_TLS_INSECURE_SKIP_VERIFY

        if not PREFECT_API_TLS_INSECURE_SKIP_VERIFY.value():
            orchestration.ssl.create_default_context(cafile=PREFECT_API_SSL_CERT_FILE.value() or certifi.where())
    except Exception as exc:  # noqa: BLE001 - the first client builds it then
        log.debug("could not build the Prefect clients' TLS context ahead: %s", exc)
    return True


class _SharedSSL(types.ModuleType):
    """The ``ssl`` module as Prefect's client module sees it: everything is ``ssl``'s own except
    ``create_default_context``, which returns one context per argument set."""

    def __init__(self) -> None:
        super().__init__("ssl")

    def __getattr__(self, name: str) -> Any:
        return getattr(ssl, name)

    @staticmethod
    @functools.lru_cache(maxsize=8)
    def create_default_context(*args: Any, **kwargs: Any) -> ssl.SSLContext:
        """``ssl.create_default_context``, built once per argument set."""
        return ssl.create_default_context(*args, **kwargs)
