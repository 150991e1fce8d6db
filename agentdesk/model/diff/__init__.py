"""The run-to-run diff for Qt: rows to draw (`rows`) and the loader that computes a diff off the GUI thread."""
