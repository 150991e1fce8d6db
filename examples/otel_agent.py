"""A plain Python agent loop: OpenTelemetry spans to agentdesk's receiver, a dangerous tool gated by an operator.

Run it (three terminals, one store; the agent gets a URL and a token, never the store):

    agentdesk agent-token create cleanup-agent          # prints the token once
    agentdesk receive                                   # OTLP/HTTP and the agent API on 127.0.0.1:4318
    OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 AGENTDESK_URL=http://127.0.0.1:4318 \
        AGENTDESK_TOKEN=adt_... python examples/otel_agent.py
    agentdesk approvals                                 # or decide in the window's queue
    agentdesk approve apr_... --actor you --args '{"paths": ["old-1.log"]}'

The agent's spans (GenAI conventions: invoke_agent, chat, execute_tool) reach the
tree and timeline through the receiver while it runs. Before its `delete_files`
tool runs, it joins the run the receiver made of its trace and asks for approval
there, under the tool's own span, and blocks; it then deletes exactly the files
the operator left in the arguments (inside a scratch folder it made), or nothing
if denied or expired. Each step is printed as one JSON line.

The model is scripted so the example needs no API key; swap `scripted_model` for a
real client call and nothing else changes.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import Status, StatusCode, Tracer

from agentdesk.client import AgentDesk, otel_span_id
from agentdesk.store.errors import NotFound

SERVICE = "cleanup-agent"
MODEL = "scripted-model"
DANGEROUS = {"delete_files"}


def say(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def scripted_model(messages: list[dict[str, str]], workdir: Path) -> dict[str, Any]:
    """Stands in for an LLM: first list the folder, then delete every log in it, then finish."""
    tool_results = [m for m in messages if m["role"] == "tool"]
    if not tool_results:
        return {"tool": "list_files", "arguments": {"folder": str(workdir)}}
    if len(tool_results) == 1:
        logs = [name for name in json.loads(tool_results[0]["content"]) if name.endswith(".log")]
        return {"tool": "delete_files", "arguments": {"folder": str(workdir), "paths": logs}}
    return {"answer": "Cleanup finished."}


def list_files(folder: str) -> list[str]:
    return sorted(p.name for p in Path(folder).iterdir())


def delete_files(folder: str, paths: list[str]) -> list[str]:
    """Deletes only plain names inside `folder`: an edited argument cannot reach outside it."""
    deleted = []
    for name in paths:
        target = Path(folder) / Path(name).name
        if target.is_file():
            target.unlink()
            deleted.append(target.name)
    return deleted


TOOLS = {"list_files": list_files, "delete_files": delete_files}


def call_tool(tracer: Tracer, gate: Gate, tool: str, arguments: dict[str, Any]) -> str:
    with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            "gen_ai.tool.call.arguments": json.dumps(arguments)}) as span:
        if tool in DANGEROUS:
            result = gate.ask(span, tool, arguments)
            say("decision", outcome=result.outcome.value, arguments=result.arguments, edited=result.edited,
                reason=result.reason, decided_by=result.decided_by, approval_id=result.approval_id)
            if not result.approved:
                span.set_status(Status(StatusCode.ERROR, result.describe()))
                return json.dumps({"error": result.describe()})
            arguments = result.arguments
        output = json.dumps(TOOLS[tool](**arguments))
        span.set_attribute("gen_ai.tool.call.result", output)
        return output


class Gate:
    """Asks agentdesk's operator inside the run the receiver made of this agent's trace."""

    def __init__(self, desk: AgentDesk, provider: TracerProvider) -> None:
        self.desk = desk
        self.provider = provider

    def ask(self, span: Any, tool: str, arguments: dict[str, Any]) -> Any:
        ctx = span.get_span_context()
        self.provider.force_flush()  # the spans so far reach the receiver now, not at the next 5 s tick
        run = self.desk.join_trace(ctx.trace_id)
        return run.request_approval(tool, arguments, parent_span_id=otel_span_id(ctx.trace_id, ctx.span_id),
                                    expires_in=float(os.environ.get("APPROVAL_TIMEOUT", 300)))


def agent_loop(tracer: Tracer, gate: Gate, workdir: Path) -> str:
    messages = [{"role": "system", "content": "You keep the scratch folder tidy."},
                {"role": "user", "content": f"Clean up the old logs in {workdir}."}]
    with tracer.start_as_current_span("invoke_agent janitor", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "janitor"}):
        for _ in range(5):
            with tracer.start_as_current_span(f"chat {MODEL}", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted",
                    "gen_ai.request.model": MODEL, "gen_ai.input.messages": json.dumps(messages)}) as span:
                reply = scripted_model(messages, workdir)
                span.set_attribute("gen_ai.output.messages", json.dumps([{"role": "assistant", "parts": [
                    {"type": "text", "content": json.dumps(reply)}]}]))
            if "answer" in reply:
                return str(reply["answer"])
            output = call_tool(tracer, gate, reply["tool"], reply["arguments"])
            say("tool", tool=reply["tool"], output=json.loads(output))
            messages += [{"role": "assistant", "content": json.dumps(reply)}, {"role": "tool", "content": output}]
    return "Gave up after 5 steps."


def main() -> int:
    provider = TracerProvider(resource=Resource.create({"service.name": SERVICE}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # reads OTEL_EXPORTER_OTLP_ENDPOINT
    tracer = provider.get_tracer("examples.otel_agent")
    workdir = Path(tempfile.mkdtemp(prefix="cleanup-agent-"))
    for name in ("old-1.log", "old-2.log", "keep.txt"):
        (workdir / name).write_text("x")
    with AgentDesk.connect(actor=SERVICE) as desk:  # $AGENTDESK_URL + $AGENTDESK_TOKEN (a store only in tests)
        try:
            answer = agent_loop(tracer, Gate(desk, provider), workdir)
        except NotFound as exc:  # no receiver: nothing of the trace reached the store
            print(f"otel_agent: {exc}", file=sys.stderr)
            return 1
        finally:
            provider.shutdown()  # flushes the last spans to the receiver
    say("done", answer=answer, remaining=list_files(str(workdir)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
