"""Cross-store search for Qt: runs the query on the runner, results as a tree model grouped by run."""
