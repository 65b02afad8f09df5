"""tianshu-mcp: hand coding work to external AI agents and judge it objectively.

The source tree keeps the design card's top-level folders (core/, adapters/, acceptance/,
tasks/, flows/, deployments/, mcp_server/, skills/); they install as subpackages of this
package, e.g. ``tianshu_mcp.core``.
"""

__version__ = "0.1.0"
