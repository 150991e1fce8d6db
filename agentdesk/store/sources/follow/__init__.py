"""Following a foreign database: table declarations, the generic follower and its watcher."""

from agentdesk.store.sources.follow.follower import TableFollower
from agentdesk.store.sources.follow.tables import (
    AppendOnly,
    Deletes,
    Follow,
    RowChanges,
    RowEvent,
    Seen,
    UpdatedInPlace,
)
from agentdesk.store.sources.follow.watcher import FollowWatcher

__all__ = ["AppendOnly", "Deletes", "Follow", "FollowWatcher", "RowChanges", "RowEvent", "Seen", "TableFollower",
           "UpdatedInPlace"]
