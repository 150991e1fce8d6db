"""Real processes for the HTTP gate's tests: `agentdesk receive` and an agent that holds only a URL and a token.

The agent process is given `AGENTDESK_URL` and `AGENTDESK_TOKEN`, and an `AGENTDESK_STORE` that
does not exist: if the client ever opened the store instead of the API, it would fail.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests import waiting

ROOT = Path(__file__).resolve().parents[2]
LISTENING = re.compile(r"Receiving OTLP/HTTP on (http://[^/\s]+)/v1/traces")


def env(**extra: str) -> dict[str, str]:
    found = dict(os.environ)
    found["PYTHONPATH"] = str(ROOT) + os.pathsep + found.get("PYTHONPATH", "")
    found.pop("AGENTDESK_URL", None)
    found.pop("AGENTDESK_TOKEN", None)
    found.update(extra)
    return found


class ReceiverProcess:
    """`agentdesk receive` on a store, in a process of its own; `url` once it listens."""

    def __init__(self, store: str, port: int = 0) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "agentdesk.cli", "--store", store, "receive", "--port", str(port),
             "--every", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        self.url = self._listening()

    def _listening(self, timeout_s: float = 60.0) -> str:
        assert self.proc.stdout is not None
        give_up = time.monotonic() + timeout_s
        while time.monotonic() < give_up:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read() if self.proc.stderr else ""
                raise AssertionError(f"the receiver exited ({self.proc.wait()}): {err}")
            found = LISTENING.search(line)
            if found:
                return found.group(1)
        raise AssertionError("the receiver did not start listening")

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(30)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class AgentProcess:
    """A Python agent given only the receiver's URL and a token; it prints one JSON line per result."""

    def __init__(self, url: str, token: str, body: str) -> None:
        script = "import json, sys\nfrom agentdesk.client import AgentDesk\n" + textwrap.dedent(body)
        self.proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env(AGENTDESK_URL=url, AGENTDESK_TOKEN=token,
                                                        AGENTDESK_STORE="/nonexistent/agentdesk.sqlite"))

    def result(self, timeout_s: float = 60.0) -> dict[str, Any]:
        out, err = self.proc.communicate(timeout=timeout_s)
        assert self.proc.returncode == 0, err
        return dict(json.loads(out.strip().splitlines()[-1]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


REQUEST = """
with AgentDesk.connect() as desk:
    agent = desk.register(project="billing", agent="refunder", model="m")
    with agent.run("refund") as run:
        r = run.request_approval("issue_refund", {"order": 1042, "amount": 30}, **%s)
        print(json.dumps({"outcome": r.outcome.value, "arguments": r.arguments, "decided_by": r.decided_by,
                          "reason": r.reason, "actor": desk.actor}), flush=True)
"""


def requesting(url: str, token: str, **options: Any) -> AgentProcess:
    return AgentProcess(url, token, REQUEST % repr(options))


def eventually(probe: Callable[[], Any], timeout_s: float = 30.0, what: str = "the condition") -> Any:
    """Wait on state: the probe's first truthy answer (a bounded wait, not a fixed sleep)."""
    return waiting.eventually(probe, timeout_s=timeout_s, what=what, poll_s=0.02)
