"""Run control: an operator pauses, resumes and stops a run; the agent honours it at its checkpoints (issue 24)."""
