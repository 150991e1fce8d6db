"""Run controls in the window: Pause / Resume / Stop on a toolbar and in the tree's context menu."""
