"""The HTTP server on the receiver's port: OTLP/HTTP endpoints and the agent API, one aiohttp app.

Above ingest (which decodes and writes what arrives) and the agents package (what an agent token may do):
the server only composes them, so the window and `agentdesk receive` serve exactly the same thing.
"""
