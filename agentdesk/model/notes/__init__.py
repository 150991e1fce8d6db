"""Notes and labels for the window: the marks every view draws, the shift list, and the writes (store/notes)."""
