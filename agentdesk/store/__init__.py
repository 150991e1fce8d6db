"""agentdesk's store: schema, read model, commands, runtime API and change bus.

Nothing here imports Qt; the GUI and the CLI are thin layers over this package.
"""
