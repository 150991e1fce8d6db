"""The Ctrl+Shift+F dialog: search spans, approvals and context items of every run."""
