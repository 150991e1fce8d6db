"""PyInstaller runtime hook: stand-ins for PySide6.QtOpenGL and PySide6.QtOpenGLWidgets (10 MB not shipped).

Why: pyqtgraph imports both at import time (PlotCurveItem and Qt/OpenGLHelpers
subclass QOpenGLWidget and keep QtOpenGL for its optional OpenGL curve drawing),
but agentdesk never turns pyqtgraph's OpenGL mode on and draws with QPainter.
The stand-ins are made only when something imports them (the CLI never pays
for Qt), give pyqtgraph a QOpenGLWidget class nothing is an instance of, and
raise an ImportError naming the reason if any other OpenGL name is used.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any

STUBBED = ("PySide6.QtOpenGL", "PySide6.QtOpenGLWidgets")
REASON = "the agentdesk bundle leaves out Qt's OpenGL modules (packaging/README.md): {name} is not available"


class _OpenGLStub(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise ImportError(REASON.format(name=f"{self.__name__}.{name}"))


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.machinery.ModuleSpec(fullname, self) if fullname in STUBBED else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _OpenGLStub(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        if module.__name__ == "PySide6.QtOpenGLWidgets":
            from PySide6.QtWidgets import QWidget

            class QOpenGLWidget(QWidget):
                """Never instantiated: only so pyqtgraph can define (and isinstance-check) its GL subclass."""

            module.__dict__["QOpenGLWidget"] = QOpenGLWidget


sys.meta_path.insert(0, _Finder())
