"""Untrusted text made displayable: hidden characters as visible marks, arguments within budgets."""
