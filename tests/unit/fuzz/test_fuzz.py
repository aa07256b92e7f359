"""The fuzzer's own machinery: reproducible inputs, mutators, URL parsing, the CLI's
in-process mode, reproducer files and --replay (no sockets)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from conformance.fuzz.cli import Reproducer, inputs, main
from conformance.fuzz.inproc import CoreHarness, CoreOutcome
from conformance.fuzz.mutate import MUTATORS, chunks, mutate
from conformance.fuzz.sessions import PROTOCOL_HEADER, Session, corpus
from conformance.fuzz.wire import Endpoint, WireError
from conformance.targets.spec import parse_url, target_spec


def test_inputs_are_reproducible_from_the_seed() -> None:
    a = [i.pieces for i in inputs(7, 50)]
    b = [i.pieces for i in inputs(7, 50)]
    c = [i.pieces for i in inputs(8, 50)]
    assert a == b
    assert a != c


def test_valid_sessions_draw_no_error_from_the_reference_core() -> None:
    # the seeds must be valid: any reply code here would be a fuzzer (or broker) bug
    harness = CoreHarness()
    for session in corpus(3, 32):
        outcome = harness.run([session.encode()])
        assert outcome == CoreOutcome((), None), (session.name, outcome)


@pytest.mark.parametrize("op", [m for _w, m in MUTATORS], ids=lambda m: m.__name__)
def test_every_mutator_changes_something_and_survives_an_empty_session(op) -> None:  # type: ignore[no-untyped-def]
    pool = corpus(4, 8)
    rng = random.Random(1)
    changed = sum(op(rng, s).encode() != s.encode() for s in pool * 4)
    assert changed > 0, f"{op.__name__} never changed a session"
    empty = Session(PROTOCOL_HEADER, ())
    assert isinstance(op(rng, empty), Session)


def test_mutate_names_its_operators_and_chunks_keep_every_octet() -> None:
    pool = corpus(5, 8)
    rng = random.Random(2)
    for s in pool:
        mutant, ops = mutate(rng, s, pool)
        assert 1 <= len(ops) <= 4
        data = mutant.encode()
        assert b"".join(chunks(rng, data)) == data


@pytest.mark.parametrize(
    "url,expected",
    [
        ("amqp://guest:guest@127.0.0.1:5673/", Endpoint("127.0.0.1", 5673, "guest", "guest", "/")),
        ("amqp://u%40x:p%2Fw@localhost/v%2Fh", Endpoint("localhost", 5672, "u@x", "p/w", "v/h")),
        ("amqp://127.0.0.1", Endpoint("127.0.0.1", 5672, "guest", "guest", "/")),
    ],
)
def test_endpoint_from_url(url: str, expected: Endpoint) -> None:
    assert Endpoint.from_url(parse_url(url)) == expected


@pytest.mark.parametrize("url", ["http://x/", "amqp://h:notaport/"])
def test_bad_urls_are_refused_where_they_are_parsed(url: str) -> None:
    with pytest.raises(ValueError, match="--broker-url"):
        target_spec(broker_url=url)


def test_endpoint_rejects_tls() -> None:
    with pytest.raises(WireError, match="plain amqp://"):
        Endpoint.from_url(parse_url("amqps://h/"))


def test_in_process_run_prints_the_figures(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["--in-process", "--inputs", "200", "--seed", "3", "--reproducers", str(tmp_path / "r.jsonl")])
    out = capsys.readouterr()
    assert rc == 0, out
    assert "inputs                200 in" in out.out
    for line in ("unhandled exceptions  0", "stuck states          0", "reproducers           none"):
        assert line in out.out
    assert "[fuzz] 200/200 inputs" in out.err
    assert not (tmp_path / "r.jsonl").exists()


def test_findings_are_written_and_replayed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = CoreHarness.run

    def faulty(self: CoreHarness, pieces: list[bytes]) -> CoreOutcome:
        # a pretend defect: any input mentioning basic.publish (class 60, method 40) "sticks"
        if b"\x00\x3c\x00\x28" in b"".join(pieces):
            return CoreOutcome((), "pretend defect", "stuck")
        return real_run(self, pieces)

    monkeypatch.setattr(CoreHarness, "run", faulty)
    path = tmp_path / "r.jsonl"
    assert main(["--in-process", "--inputs", "30", "--reproducers", str(path)]) == 1
    records = [Reproducer.from_json(line) for line in path.read_text().splitlines()]
    assert records and all(r.kind == "stuck" and r.mode == "in-process" for r in records)
    capsys.readouterr()
    assert main(["--replay", str(path)]) == 1
    assert f"{len(records)} of {len(records)} reproduce" in capsys.readouterr().out
    monkeypatch.setattr(CoreHarness, "run", real_run)  # "fixed": the same file no longer reproduces
    assert main(["--replay", str(path)]) == 0
    assert f"0 of {len(records)} reproduce" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv,message",
    [
        (["--in-process", "--inputs", "-1"], "--inputs must be 0 or more"),
        (["--in-process", "--bound", "0"], "must be positive"),
        (["--replay", "/nonexistent/r.jsonl"], "cannot read /nonexistent/r.jsonl"),
        (["--broker-url", "http://x/"], "unsupported URL scheme"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_replay_rejects_a_file_that_is_not_a_reproducer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"kind": "dead"}) + "\n")
    assert main(["--replay", str(bad)]) == 2
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    assert main(["--replay", str(empty)]) == 2
    assert "holds no reproducer" in capsys.readouterr().err


def test_the_cli_dispatches_fuzz(capsys: pytest.CaptureFixture[str]) -> None:
    from conformance.cli import main

    assert main(["fuzz", "--in-process", "--inputs", "5"]) == 0
    assert "inputs" in capsys.readouterr().out


