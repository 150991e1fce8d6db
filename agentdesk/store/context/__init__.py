"""An agent's context window: the operator's commands on its items."""
