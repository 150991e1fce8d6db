"""Agent identities for the HTTP gate: bearer tokens (tokens.py) and who owns what (ownership.py)."""
