"""The audit log: hash-chained, keyed records (`chain`), and checking them (`verify`, `state`).

docs/audit.md has the threat model: what an edit of the database alone cannot
hide, and what someone holding both the key and the anchor still can.
"""

from agentdesk.store.audit.chain import GENESIS, AuditAppender, canonical_json, record_hash, store_id_of
from agentdesk.store.audit.verify import ChainReport, Failure, Verdict, verify_chain, verify_store

__all__ = ["GENESIS", "AuditAppender", "ChainReport", "Failure", "Verdict", "canonical_json", "record_hash",
           "store_id_of", "verify_chain", "verify_store"]
