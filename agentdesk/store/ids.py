"""Readable, sortable-enough ids: a short type prefix and 16 random hex digits."""

from __future__ import annotations

import uuid


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:16]}"
