"""Questions ("asks"): an agent's request for a person's input, answered exactly once (issue 24)."""
