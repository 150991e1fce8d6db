"""examples/approval_hook.py: the guard gates only what needs approval and runs the operator's edit."""

from __future__ import annotations

import asyncio
import importlib.util
import sys
import threading
from pathlib import Path
from types import ModuleType

from agentdesk.store.approvals import commands as approval_commands
from agentdesk.store.native import NativeSource
from agentdesk.store.persistence.database import open_store
from tests.waiting import eventually

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "approval_hook.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("approval_hook_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


def test_the_guard_blocks_until_the_operator_edits_and_approves(store_path: Path) -> None:
    example = load_example()
    store = open_store(str(store_path))
    decided: list[str] = []

    def operator() -> None:
        source = NativeSource(store)
        pending = eventually(lambda: source.approvals("pending"), what="the agent's request")
        decided.append(pending[0].arguments)
        approval_commands.decide(store, pending[0].id, True, "ann", "partial refund",
                                 '{"order": "A-17", "amount": 80}')

    thread = threading.Thread(target=operator, daemon=True)
    thread.start()
    log = asyncio.run(example.main_async(str(store_path)))
    thread.join(5)
    assert decided == ['{"amount":120,"order":"A-17"}']  # only the refund over 100 asked
    assert log == [
        {"tool": "lookup_order", "arguments": {"order": "A-17"}, "result": {"order": "A-17", "paid": 120}},
        {"tool": "refund", "arguments": {"order": "A-17", "amount": 80}, "result": "refunded 80 on A-17"},
        {"tool": "refund", "arguments": {"order": "A-18", "amount": 20}, "result": "refunded 20 on A-18"},
    ]
    assert len(NativeSource(store).approvals("all")) == 1
    store.close()
