"""Notes and labels an operator leaves on a span, a run or an approval for the next shift (issue 24).

Qt-free. `commands` writes (one unit of work each, compare-and-set, audited, on the change bus; on PostgreSQL
through the SECURITY DEFINER functions of migration 0018_notes), `reads` answers the views and the CLI, `labels`
says what a label may be, `marks` holds the frozen values every reader hands on.
"""
