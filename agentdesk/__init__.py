"""agentdesk: a desktop inspector and controller for LLM agent runs.

The layers live in the repository's top-level folders and are reached through this package:
`agentdesk.store` (no Qt), `agentdesk.model` (Qt models), `agentdesk.gui` (widgets and the Qt-free CLI
in `agentdesk.cli`), `agentdesk.resources`.
"""

__version__ = "0.1.0"
"""The one place the version is written: pyproject.toml reads it, and so do `agentdesk --version` and the bundle."""
