"""Qt models that adapt the store's read model to Qt views (no widgets here)."""
