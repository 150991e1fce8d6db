"""Notes and labels in the window: the "Add note / label…" dialog, the panel in the detail panes, Shift notes."""
