"""The run controls' state (pause, resume, stop) for the window's toolbar and the tree's context menu."""
