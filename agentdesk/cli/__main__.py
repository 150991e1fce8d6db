"""`python -m agentdesk.cli`: the same entry point as the `agentdesk` console script."""

from agentdesk.cli.main import main

raise SystemExit(main())
