"""The processes whose environment holds an entry: how tests find what a run (and everything it
spawned, detached daemons included) left behind."""

from __future__ import annotations

from pathlib import Path


def processes_with_env(entry: str) -> list[int]:
    """PIDs of the live processes whose environment holds ``entry`` (``NAME=value``), zombies left out."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if entry.encode() not in (proc / "environ").read_bytes().split(b"\0"):
                continue
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                found.append(int(proc.name))
        except OSError:
            continue  # gone meanwhile, or not ours to read
    return found


def describe(pids: list[int]) -> list[str]:
    """``pid: command line`` of each (for an assertion's message)."""
    out = []
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            argv = "(gone)"
        out.append(f"{pid}: {argv}")
    return out
