"""An operator's messages to an agent: queued, delivered into its context at its next model call, or cancelled."""
