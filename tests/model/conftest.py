"""Model tests run their coroutines on qasync's loop, as the window does, and build the same small world as the
view tests (the fixtures are tests/gui/conftest.py's)."""

from tests.gui.conftest import World, build_world, qasync_loop, services, world

__all__ = ["World", "build_world", "qasync_loop", "services", "world"]
