"""Model tests run their coroutines on qasync's loop, as the window does (the fixture is the view tests')."""

from tests.gui.conftest import qasync_loop  # noqa: F401 - the autouse fixture
