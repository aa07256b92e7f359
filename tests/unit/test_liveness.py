"""Never cascade: the marker that tells every worker the broker stopped answering."""

from __future__ import annotations

from pathlib import Path

from conformance.plugin.liveness import (
    Unresponsive,
    check_timeout,
    marker_path,
    read_marker,
    write_marker,
)


def test_first_writer_wins_and_names_the_case(tmp_path: Path) -> None:
    path = marker_path(tmp_path / "results", "run1")
    assert read_marker(path) is None
    write_marker(path, Unresponsive("acks.cancel-after-queue-deleted", "no answer", "gw0"))
    write_marker(path, Unresponsive("later.case", "no answer either", "gw1"))
    found = read_marker(path)
    assert found == Unresponsive("acks.cancel-after-queue-deleted", "no answer", "gw0")
    assert "after case acks.cancel-after-queue-deleted (no answer)" in found.message()
    assert [p.name for p in path.parent.iterdir()] == ["run1.unresponsive.json"]  # no temp files left


def test_the_check_is_bounded_to_a_few_seconds() -> None:
    assert check_timeout(0.5) == 2.0
    assert check_timeout(3.0) == 3.0
    assert check_timeout(60.0) == 5.0


def test_post_mortem_saves_beside_the_results_and_never_raises(tmp_path) -> None:
    from conformance.plugin.liveness import post_mortem

    assert post_mortem(None, tmp_path, "r1") is None  # a URL target: nothing to ask

    def save(dest):
        dest.write_text("goroutine 1 [semacquire, 3 minutes]:\n")
        return f"stacks: {dest}"

    assert post_mortem(save, tmp_path, "r1") == f"stacks: {tmp_path / 'r1.broker-state.txt'}"

    def broken(dest):
        raise OSError("disk full")

    assert post_mortem(broken, tmp_path, "r2") == "the broker's state could not be saved: disk full"
