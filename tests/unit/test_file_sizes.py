"""No module of the package grows past a size a newcomer can read in one go.

The cap is 700 lines; a module that outgrows it is split along a seam (as ``protocol/raw.py``
was into ``raw``, ``rawchannel`` and ``rawevents``), not raised here.
"""

from __future__ import annotations

from pathlib import Path

import conformance

PACKAGE = Path(conformance.__file__).parent
MAX_LINES = 700


def too_long(root: Path, limit: int = MAX_LINES) -> list[str]:
    out = []
    for path in sorted(root.rglob("*.py")):
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > limit:
            out.append(f"{path.relative_to(root.parent)}: {n} lines (cap {limit})")
    return out


def test_no_module_over_the_cap() -> None:
    assert too_long(PACKAGE) == []


# A module split when it reaches the cap is split in a hurry, along whatever line fits: one within
# MARGIN lines of it is split along a seam now, while there is room to choose the seam.
MARGIN = 50


def test_no_module_packed_against_the_cap() -> None:
    assert too_long(PACKAGE, MAX_LINES - MARGIN) == []


def test_the_guard_sees_a_long_module(tmp_path: Path) -> None:
    pkg = tmp_path / "conformance"
    pkg.mkdir()
    (pkg / "short.py").write_text("x = 1\n" * MAX_LINES)
    (pkg / "long.py").write_text("x = 1\n" * (MAX_LINES + 1))
    assert too_long(pkg) == [f"conformance/long.py: {MAX_LINES + 1} lines (cap {MAX_LINES})"]
