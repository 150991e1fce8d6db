"""The bundle's entry point: the same `main` as the `agentdesk` console script."""

import sys

from agentdesk.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
