"""`agentdesk pause RUN`, `agentdesk resume RUN`, `agentdesk stop RUN`: an operator's hold on a run.

The agent honours them at its next checkpoint (client library: `run.checkpoint()`, called inside
`request_approval` and `model_call`). A lensagent database (with `--allow-writes`) can only stop: the run
ends cancelled at once, as lensagent's interruptCall would end it. Exit codes: 0 done; 2 bad input, or a
store whose runs cannot be paused (another runtime's database, a read-only one, a viewer's login, lensagent's
pause; the sentence says which); 3 the run is in the wrong state (resume a run that is not paused, pause a
paused one, stop one already stopping) or has already finished; 4 no such run; 5 the store cannot be used."""

from __future__ import annotations

import argparse

from agentdesk.cli import output as out
from agentdesk.cli.opening import EXIT_OK, open_any, say
from agentdesk.store.readmodel import ControlState
from agentdesk.store.source import require_run_controller

VERBS = {"pause": "Paused", "resume": "Resumed", "stop": "Asked to stop"}
AFTER = {ControlState.PAUSED: "the agent blocks at its next checkpoint",
         ControlState.RUNNING: "the agent goes on from its checkpoint",
         ControlState.STOPPING: "the agent ends the run cancelled at its next checkpoint",
         ControlState.STOPPED: "the run ended cancelled, its open calls interrupted"}


def control_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("run", type=run_id, metavar="RUN", help="the run's id (the tree, `agentdesk info`)")
    p.add_argument("--actor", required=True, help="your name, recorded with the change and in the audit log")
    p.add_argument("--reason", help="why, recorded with the change and shown beside the run")


def run_id(text: str) -> str:
    """An id is a word: empty or blank (an unset shell variable) is a usage error."""
    if not text.strip():
        raise argparse.ArgumentTypeError("a run id is needed, and this one is empty (the tree shows run ids)")
    return text


def cmd_control(args: argparse.Namespace) -> int:
    source = open_any(args, write=True)
    try:
        controller = require_run_controller(source)
        act = {"pause": controller.pause_run, "resume": controller.resume_run, "stop": controller.stop_run}
        control = act[args.command](args.run, args.actor, args.reason)
    finally:
        source.close()
    why = f" ({out.clean(control.reason)})" if control.reason else ""
    verb = "Stopped" if control.state is ControlState.STOPPED else VERBS[args.command]  # lensagent: at once
    say(f"{verb} run {out.clean(control.run_id)} as {out.clean(args.actor)}{why}: "
            f"{AFTER.get(control.state, control.state.value)}.")
    return EXIT_OK
