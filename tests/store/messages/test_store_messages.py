"""Messages in the store, on SQLite and PostgreSQL: send, take (delivery into the context), cancel, refusals.

Every move is a compare-and-set on `pending`, audited and on the change bus; a message becomes a context item
at the end of the agent's context, and the context read-back names its author.
"""

from __future__ import annotations

import threading
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdesk.store.agents.context_view import context_view
from agentdesk.store.errors import Conflict, InvalidInput, NotFound
from agentdesk.store.messages import commands as messages
from agentdesk.store.messages.reads import delivered_authors, pending_messages, read_message
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.bus import Change
from agentdesk.store.persistence.database import Store
from agentdesk.store.runtime import AgentRuntime
from tests.conftest import BACKENDS, World

pytestmark = pytest.mark.parametrize("backend", BACKENDS, indirect=True)


def test_a_message_is_pending_then_delivered_at_the_end_of_the_context(store: Store, rt: AgentRuntime,
                                                                       world: World) -> None:
    heard: list[Change] = []
    store.bus.subscribe(heard.extend)
    before = context_view(store, world.agent)
    message_id = messages.send(store, world.agent, "Use the staging database, not prod.", "alice")
    queued = read_message(store, message_id)
    assert queued is not None and queued.pending and queued.created_by == "alice"
    assert [m.id for m in pending_messages(store, world.agent)] == [message_id]
    assert [m.id for m in pending_messages(store)] == [message_id]
    assert context_view(store, world.agent).entries == before.entries  # not in the context until taken
    assert any(c.entity == "message" and c.op == "insert" and c.id == message_id for c in heard)

    delivered = messages.take(store, world.agent, "planner-process")
    assert [(d.message_id, d.content, d.author) for d in delivered] == [
        (message_id, "Use the staging database, not prod.", "alice")]
    after = context_view(store, world.agent)
    assert after.revision > before.revision
    last = after.entries[-1]
    assert (last.item_id, last.role, last.content, last.author) == (
        delivered[0].item_id, "user", "Use the staging database, not prod.", "alice")
    assert [e.item_id for e in after.entries[:-1]] == [e.item_id for e in before.entries]
    assert delivered_authors(store, [last.item_id]) == {last.item_id: "alice"}
    taken = read_message(store, message_id)
    assert taken is not None and taken.status == "delivered" and taken.item_id == last.item_id
    assert pending_messages(store) == []
    assert messages.take(store, world.agent, "planner-process") == []  # delivered once
    assert any(c.entity == "message" and c.op == "update" for c in heard)
    assert any(c.entity == "context" and c.id == world.agent for c in heard)
    with pytest.raises(Conflict, match="already delivered"):
        messages.cancel(store, message_id, "bob")


def test_messages_are_delivered_oldest_first_each_as_its_own_turn(store: Store, world: World) -> None:
    ids = [messages.send(store, world.agent, f"hint {n}", "alice") for n in range(3)]
    delivered = messages.take(store, world.agent, "agent")
    assert [d.message_id for d in delivered] == ids
    entries = context_view(store, world.agent).entries
    assert [e.content for e in entries[-3:]] == ["hint 0", "hint 1", "hint 2"]


def test_a_cancelled_message_is_never_delivered(store: Store, world: World) -> None:
    message_id = messages.send(store, world.agent, "never mind", "alice")
    messages.cancel(store, message_id, "bob")
    cancelled = read_message(store, message_id)
    assert cancelled is not None and (cancelled.status, cancelled.settled_by) == ("cancelled", "bob")
    assert messages.take(store, world.agent, "agent") == []
    assert all(e.content != "never mind" for e in context_view(store, world.agent).entries)
    with pytest.raises(Conflict, match="already cancelled by bob"):
        messages.cancel(store, message_id, "carol")


def test_refusals_are_one_sentence(store: Store, rt: AgentRuntime, world: World) -> None:
    with pytest.raises(InvalidInput, match="1 MB"):
        messages.send(store, world.agent, "x" * 1_000_001, "alice")
    with pytest.raises(InvalidInput, match="needs some text"):
        messages.send(store, world.agent, "  \n", "alice")
    with pytest.raises(NotFound, match="no agent"):
        messages.send(store, "agt_missing", "hello", "alice")
    with pytest.raises(NotFound, match="no message"):
        messages.cancel(store, "msg_missing", "alice")
    rt.set_session_status(world.session, "done")
    with pytest.raises(Conflict, match=r"^The agent planner has finished \(its session is done\); a message would "
                                       r"never be read\.$"):
        messages.send(store, world.agent, "too late", "alice")
    assert pending_messages(store) == []


def test_every_move_is_in_the_audit_chain(store: Store, world: World) -> None:
    first = messages.send(store, world.agent, "one", "alice")
    second = messages.send(store, world.agent, "two", "alice")
    messages.cancel(store, second, "bob")
    messages.take(store, world.agent, "agent")
    records = [(r.action, r.entity_id) for r in NativeSource(store).audit_records(50)]
    assert ("message.send", first) in records and ("message.send", second) in records
    assert ("message.cancel", second) in records and ("message.deliver", first) in records
    assert NativeSource(store).verify().ok


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(["cancel", "take"]))
def test_cancel_racing_delivery_settles_exactly_once(store: Store, world: World, order: list[str]) -> None:
    """A cancel and a delivery started together: exactly one of them moves the message, whatever the order."""
    text = f"race {uuid.uuid4().hex}"  # the store lives across examples: each example's message is its own
    message_id = messages.send(store, world.agent, text, "alice")
    outcomes: dict[str, object] = {}
    start = threading.Barrier(2)

    def run(what: str) -> None:
        start.wait()
        try:
            outcomes[what] = (messages.take(store, world.agent, "agent") if what == "take"
                              else messages.cancel(store, message_id, "bob"))
        except Conflict as refused:
            outcomes[what] = refused
    threads = [threading.Thread(target=run, args=(what,)) for what in order]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    final = read_message(store, message_id)
    assert final is not None
    delivered = [d for d in outcomes["take"] or [] if getattr(d, "message_id", None) == message_id]  # type: ignore[attr-defined]
    in_context = [e for e in context_view(store, world.agent).entries if e.content == text]
    if final.status == "delivered":
        assert isinstance(outcomes["cancel"], Conflict) and len(delivered) == 1 and len(in_context) == 1
    else:
        assert final.status == "cancelled" and outcomes["cancel"] is None and delivered == [] and in_context == []
    assert pending_messages(store, world.agent) == []
