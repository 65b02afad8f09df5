"""A scripted model endpoint for the real agent CLIs (docs/real-agents.md): see :mod:`.server`."""

from .plan import Edit, Hold, Plan, Say, Script
from .server import MODEL, ModelEndpoint, Recorded

__all__ = ["MODEL", "Edit", "Hold", "ModelEndpoint", "Plan", "Recorded", "Say", "Script"]
