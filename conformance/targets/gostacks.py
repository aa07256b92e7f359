"""Read a Go program's SIGQUIT dump (every goroutine's stack): what a hung garagemq waits on.

Hand-written: the dump's format is the Go runtime's plain text (``goroutine N [state, T minutes]:``
then function/file line pairs); no parser of it is packaged for Python, and one line of summary
needs only the headers and the first frame of the program's own code.
"""

from __future__ import annotations

import re
from collections import Counter

_HEADER = re.compile(r"^goroutine \d+ \[([^\]]*)\]:$")
# States of a goroutine that waits for another one: a mutex (semacquire, sync.Mutex.Lock,
# sync.RWMutex.Lock/RLock) or a channel nobody serves.
_WAITING = ("semacquire", "sync.Mutex.Lock", "sync.RWMutex.Lock", "sync.RWMutex.RLock", "chan send",
            "chan receive", "select")


def blocked_in(dump: str, package: str) -> tuple[int, Counter[str]]:
    """(goroutines in the dump, {"<state> in <first frame of package>": count}) for the goroutines
    that wait on a lock or a channel inside ``package`` (e.g. ``github.com/valinurovam/garagemq/``)."""
    total = 0
    found: Counter[str] = Counter()
    state: str | None = None
    for line in dump.splitlines():
        m = _HEADER.match(line)
        if m:
            total += 1
            kind = m.group(1).split(",")[0].strip()
            state = kind if kind.startswith(_WAITING) else None
        elif state is not None and line.startswith(package):
            func = line[len(package):].split("(0x")[0].split("(...")[0].removesuffix("()")
            found[f"{state} in {func}"] += 1
            state = None
    return total, found


def summary(dump: str, package: str, top: int = 6) -> str:
    """One line: how many goroutines, and where the ones waiting on locks (then channels) wait."""
    total, found = blocked_in(dump, package)
    locks = Counter({k: n for k, n in found.items() if not k.startswith(("chan ", "select"))})
    if not locks:
        return f"{total} goroutines, none waiting on a lock in {package.rstrip('/')}"
    parts = [f"{n}× {where}" for where, n in locks.most_common(top)]
    more = len(locks) - top
    return (f"{total} goroutines, {sum(locks.values())} waiting on a lock: " + "; ".join(parts)
            + (f"; +{more} more" if more > 0 else ""))
