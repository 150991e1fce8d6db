"""The typed seam: reading and lifecycle for every source, writes only where a source has them."""

from __future__ import annotations

from typing import Any

import pytest

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import Unsupported
from agentdesk.store.native import NativeSource, native_store
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.source import (
    ApprovalWriter,
    Capability,
    ContextWriter,
    Source,
    approval_writer,
    context_writer,
    decide,
    require_context_writer,
)
from tests.conftest import World

WRITES = ("decide", "set_group_visibility", "set_item_locked", "edit_item", "compact", "undo_compaction")


class ReadOnlyView:
    """A source with no write methods at all, as a read-only foreign one is: everything else delegates."""

    def __init__(self, inner: NativeSource) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        if name in WRITES:
            raise AttributeError(name)
        return getattr(self._inner, name)

    @property
    def capabilities(self) -> frozenset[Capability]:
        return frozenset()

    def why_not(self, capability: Capability) -> str:
        return f"This viewer cannot {capability.value.replace('_', ' ')}."


def test_the_native_source_is_a_reader_and_both_writers(source: NativeSource) -> None:
    assert isinstance(source, Source)
    assert approval_writer(source) is source and context_writer(source) is source
    assert isinstance(source, ApprovalWriter) and isinstance(source, ContextWriter)


def test_a_source_without_writes_gets_no_writer_and_a_sentence(source: NativeSource, world: World) -> None:
    view = ReadOnlyView(source)
    assert approval_writer(view) is None and context_writer(view) is None
    with pytest.raises(Unsupported, match=r"^This viewer cannot approve\.$") as refused:
        decide(view, world.approval, True, "alice")  # type: ignore[arg-type]
    assert refused.value.exit_code == 2
    with pytest.raises(Unsupported, match=r"^This viewer cannot compact\.$"):
        require_context_writer(view, Capability.COMPACT)  # type: ignore[arg-type]
    assert source.approval(world.approval).status == rm.ApprovalStatus.PENDING  # nothing was written


def test_decide_goes_through_the_writer(source: NativeSource, world: World) -> None:
    decided = decide(source, world.approval, True, "alice")
    assert decided.status is rm.ApprovalStatus.APPROVED and decided.decided_by == "alice"


def test_locate_takes_entity_kinds(source: NativeSource, world: World) -> None:
    assert source.locate(EntityKind.RUN, world.run).agent_ids == (world.agent,)
    assert source.locate(EntityKind.APPROVAL, world.approval).run_id == world.run


def test_native_only_operations_name_the_other_runtime(source: NativeSource) -> None:
    assert native_store(source, "host simulated agents") is source.store
