"""The ``gui`` driver: desktop chat agent apps driven over the Chrome DevTools Protocol (docs/agent-adapters.md).

* :mod:`.driver` — the driver of one round; :mod:`.config` — the profile's ``gui`` object;
* :mod:`.instance` — which app instance a task drives; :mod:`.session` — what stays open between rounds;
* :mod:`.page` — the app window and its selectors; :mod:`.liveness` — the round's liveness judge.
"""
