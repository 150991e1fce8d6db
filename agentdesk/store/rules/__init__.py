"""Standing approval rules: allow / deny / ask a tool call without asking a person every time.

`model` holds the rule value and its matcher, `shell` turns a command into the
simple commands it would run, `matching` decides whether a rule covers a call,
`commands` writes rules, `apply` decides a new approval by rule inside
`request_approval`'s transaction, `applier` rules on agent logins' requests on PostgreSQL from an operator's
process (the window, `agentdesk rules apply`), and `dryrun` replays a draft rule over history.
"""
