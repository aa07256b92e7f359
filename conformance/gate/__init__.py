"""The release gate: a run compared with a committed baseline and its triage, in plain Python."""
