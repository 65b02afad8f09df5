"""The per-home hosting runtime: the background service that hosts a data home's Prefect.

The launcher finds or starts it; identity proves it is this home's; the service runs the embedded
Prefect API + UI, the process worker, the fork server of warm flow-run engines, the intake of
accepted submissions, the sweeps and the watchdog (docs/hosting.md, docs/architecture.md §3).
The work pool, queues and deployments it serves are defined in :mod:`tianshu_mcp.deployments`.
"""
