"""One racer in its own process: take the agent's messages, or cancel each of them, as soon as told to go.

    python -m tests.store.messages.race_worker STORE AGENT take|cancel MSG_ID...

Prints one JSON line: the message ids it settled (delivered or cancelled) and those it lost.
"""

from __future__ import annotations

import json
import sys

from agentdesk.store.errors import Conflict
from agentdesk.store.messages import commands as messages
from agentdesk.store.persistence.database import open_store


def main(argv: list[str]) -> int:
    location, agent_id, role, *ids = argv
    store = open_store(location)
    try:
        sys.stdin.readline()  # every racer is connected: go together
        won, lost = [], []
        if role == "take":
            won = [d.message_id for d in messages.take(store, agent_id, "racer-agent")]
        else:
            for message_id in ids:
                try:
                    messages.cancel(store, message_id, f"racer-{role}")
                    won.append(message_id)
                except Conflict:
                    lost.append(message_id)
        print(json.dumps({"won": won, "lost": lost}), flush=True)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
