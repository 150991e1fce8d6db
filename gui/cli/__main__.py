"""`python -m agentdesk.gui.cli`: the same entry point as the `agentdesk` console script."""

from agentdesk.gui.cli.main import main

raise SystemExit(main())
