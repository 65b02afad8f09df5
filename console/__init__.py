"""The ``tianshu-mcp`` console commands: ``server`` (the stdio MCP server), ``demo``, ``service``,
``config``, ``schedule``, ``agents``, ``holdout``, ``visual``, ``worker`` (README, "Commands").

:mod:`.main` parses the command line and hands each command to its module; the MCP surface itself
lives in :mod:`tianshu_mcp.mcp_server`.
"""
