"""The read side of the contract: the tree from project to run, a run's spans, approvals, contexts."""

from __future__ import annotations

import pytest

from agentdesk.store import readmodel as rm
from agentdesk.store.errors import NotFound
from agentdesk.store.persistence.bus import EntityKind
from agentdesk.store.source import Source
from tests.contract.kinds import Kind


def walk(source: Source) -> list[tuple[rm.Project, rm.Task, rm.Session, rm.Agent, rm.Run]]:
    """Every (project, task, session, agent, run) the tree reaches, through the listing calls only."""
    found = []
    for project in source.projects():
        for task in source.tasks(project.id):
            for session in source.sessions(task.id):
                for agent in source.agents(session.id):
                    found += [(project, task, session, agent, run) for run in source.runs(agent.id).items]
    return found


def test_the_tree_reaches_runs_and_single_reads_agree_with_it(reader: Source) -> None:
    paths = walk(reader)
    assert paths, "the tree reaches no run"
    for project, task, session, agent, run in paths[:25]:
        assert (task.project_id, session.task_id, agent.session_id, run.agent_id) == (
            project.id, task.id, session.id, agent.id)
        assert reader.run(run.id) == run
        assert reader.agent(agent.id) == agent
        where = reader.locate(EntityKind.RUN, run.id)
        assert (where.project_id, where.task_id, where.session_id, where.run_id) == (
            project.id, task.id, session.id, run.id)
        assert where.agent_ids[-1] == agent.id
    with pytest.raises(NotFound):
        reader.run("no-such-run")
    with pytest.raises(NotFound):
        reader.agent("no-such-agent")


def test_span_table_whole_and_by_ids(reader: Source) -> None:
    run_id = reader.showcase_run()
    assert run_id is not None
    table = reader.span_table(run_id)
    assert len(table) > 1 and len(set(table.ids)) == len(table.ids)
    columns = {span_id: (table.parent_ids[n], table.kinds[n], table.names[n], table.statuses[n], table.starts[n],
                         table.ends[n], table.input_tokens[n], table.output_tokens[n], table.costs[n])
               for n, span_id in enumerate(table.ids)}
    wanted = table.ids[::2][:5]
    subset = reader.span_table(run_id, [*wanted, "no-such-span"])
    assert sorted(subset.ids) == sorted(wanted)  # only those, unknown ids skipped
    for n, span_id in enumerate(subset.ids):  # the same values as in the whole table
        assert (subset.parent_ids[n], subset.kinds[n], subset.names[n], subset.statuses[n], subset.starts[n],
                subset.ends[n], subset.input_tokens[n], subset.output_tokens[n], subset.costs[n]) == columns[span_id]
    assert len(reader.span_table(run_id, [])) == 0
    for span_id in table.ids[:40]:  # every kind of span, one at a time, as a live timeline asks
        alone = reader.span_table(run_id, [span_id])
        assert alone.ids == [span_id]
        assert (alone.parent_ids[0], alone.kinds[0], alone.names[0], alone.statuses[0], alone.starts[0],
                alone.ends[0], alone.input_tokens[0], alone.output_tokens[0], alone.costs[0]) == columns[span_id]
    for span_id in wanted:
        span = reader.span(span_id)
        assert (span.id, span.run_id, span.kind, span.name) == (span_id, run_id, columns[span_id][1],
                                                              columns[span_id][2])
        assert isinstance(reader.sent_context(span_id), list)
        assert reader.locate(EntityKind.SPAN, span_id).run_id == run_id
    with pytest.raises(NotFound):
        reader.span("no-such-span")


def test_approvals_list_and_single_reads_agree(reader: Source, kind: Kind,
                                               built: tuple[object, dict[str, str]]) -> None:
    pending = reader.approvals("pending")
    assert built[1][kind.decidable] in {a.id for a in pending}
    assert all(a.status == "pending" for a in pending)
    everything = {a.id for a in reader.approvals("all")}
    assert {a.id for a in pending} < everything  # the fixtures hold decided ones too
    for approval in pending:
        assert reader.approval(approval.id) == approval
        if approval.run_id:
            assert reader.locate(EntityKind.APPROVAL, approval.id).run_id == approval.run_id
    with pytest.raises(NotFound):
        reader.approval("no-such-approval")


def test_context_reads(reader: Source, kind: Kind, built: tuple[object, dict[str, str]]) -> None:
    agent_id = built[1][kind.context_agent]
    context = reader.context(agent_id)
    assert context.agent_id == agent_id
    assert bool(context.items) == bool(context.groups) == kind.has_context
    groups = {g.id for g in context.groups}
    assert all(item.group_id in groups and item.agent_id == agent_id for item in context.items)
    with pytest.raises(NotFound):
        reader.context("no-such-agent")
