"""A failure's *form*: its verdict and a stable signature of what was observed.

A triage entry pins the form of each failure it explains (:mod:`conformance.gate.triage`), so a
broker that starts failing a known case another way (a hang where there was an error code, another
reply code, another method answered) is a *changed* failure, not a known one. The signature is
derived from the result record alone (``observed``, ``message``, ``extra.invariants``) and keeps
only what a broker decides:

- the **kind of mismatch**: ``close`` (the broker closed the channel or connection), ``timeout``
  (nothing within the case timeout), ``no-reply`` (a later probe was answered instead), ``open``
  (the broker accepted what it should have refused: the channel/connection stayed open),
  ``socket`` (the socket closed), ``invariant`` (a wire invariant broken), ``value`` (any other
  expected-against-observed difference), ``reason`` (UNSUPPORTED / INFORMATIONAL / NOT_RUN: the
  reason given, not an observation);
- the **observed value**, normalised: reply codes with their constant names, class/method
  (``60.110``), method names, values compared; never reply texts, generated names
  (``amqpc-…``, ``amq.gen-…``, ``amq.ctag-…``, hex ids), timings, ports, delivery tags, the
  frames received before a timeout (which depend on the moment it hit);
- the **check** that failed: the record's ``message`` with its profile source and numbers of
  seconds dropped.

Examples (garagemq's committed baseline)::

    access.unknown-user-closes-403   FAIL     value 530 | connection.close reply-code
    recover.requeue-redelivers-get   FAIL     close connection.close 540 NOT_IMPLEMENTED 60.110 |
                                              broker closed while waiting for basic.recover-ok (reply to
                                              basic.recover)
    queue.delete-missing-404         FAIL     close channel.close 404 NOT_FOUND 50.40 | queue.delete
    acks.cancel-after-queue-deleted  TIMEOUT  timeout nothing within Ns | TIMEOUT after Ns waiting for
                                              queue.delete-ok (reply to queue.delete)

A form is written ``"<VERDICT> <signature>"``; ``"<VERDICT> *"`` pins the verdict only.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ANY = "*"
MAX_FORM = 140  # characters of the normalised observed value kept
MAX_CHECK = 100  # characters of the normalised message kept
REASON_VERDICTS = frozenset({"UNSUPPORTED", "INFORMATIONAL", "NOT_RUN"})

# Generated names and run-dependent numbers, in the order they are applied.
_NORMALISE: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"amqpc-[A-Za-z0-9._\-]*"), "amqpc-…"),
    (re.compile(r"amq\.(gen|ctag)-[A-Za-z0-9_\-]+"), r"amq.\1-…"),
    (re.compile(r"\b[0-9a-f]{8,}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]{22,}\b"), "…"),
    (re.compile(r"\b\d+(?:\.\d+)?\s?(?:ms|s|seconds?)\b"), "Ns"),
    (re.compile(r"(delivery[_ -]tag[=: ]\s*)\d+", re.I), r"\1N"),
    (re.compile(r"((?:localhost|\d+\.\d+\.\d+\.\d+|\]|[a-z0-9-]+\.[a-z]+)):\d{2,5}\b"), r"\1:PORT"),
    (re.compile(r"\b0x[0-9a-f]+\b", re.I), "0x…"),
    # How a socket's end was seen is a race between the broker's close and the client's next send:
    # "socket closed (closed by the broker)" one run, "([Errno 104] Connection reset by peer)" the next.
    (re.compile(r"socket closed \((?:closed by the broker|\[Errno \d+\] [^)]*|EOF|broken pipe)\)", re.I),
     "socket closed"),
    (re.compile(r"\s+"), " "),
)
# connection.close 540 NOT_IMPLEMENTED 'text' (class 60, method 110): the code, name and method kept.
_CLOSE = re.compile(
    r"\b(connection|channel)\.close\s+(\d{3})(?:\s+([A-Z][A-Z_]+))?"
    r"(?:\s+(?:\"[^\"]*\"|'(?:[^'\\]|\\.)*'))?(?:\s*\(class (\d+), method (\d+)\))?"
)
# The client libraries' form: ChannelClosed (503, 'COMMAND_INVALID - …'), ConnectionClosedByBroker: (540, '…')
_CLIENT_CLOSE = re.compile(r"\b(\w*Clos\w*|Connection\w+|Channel\w+)\b:?\s*\((\d{3}),\s*(['\"])(.*?)\3\)")
_CLIENT_TEXT = re.compile(r"<?\b(Connection\w+|Channel\w+)\b:?\s*\(\s*(['\"])([A-Z_]+) - .*?\2,?\s*\)>?")
_FRAMES = re.compile(r";?\s*frames received\b.*$", re.S)
_PROFILE = re.compile(r"\s*\(profile [a-z0-9_-]+:.*$", re.S)

_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("timeout", re.compile(r"nothing within|no complete answer|timed? ?out\b|within Ns", re.I)),
    ("close", re.compile(r"\b(connection|channel)\.close \d{3}|\bclose \d{3}\b")),
    ("no-reply", re.compile(r"\bno reply\b|\bno [a-z]+\.[a-z-]+-ok\b|answered (?:a )?later probe|"
                            r"answered first", re.I)),
    ("socket", re.compile(r"socket closed|connection reset|broken pipe|EOF", re.I)),
    ("open", re.compile(r"stayed open|still open|probe (?:was )?answered|accepted|no error", re.I)),
)


def normalise(text: str) -> str:
    for pattern, repl in _NORMALISE:
        text = pattern.sub(repl, text)
    return text.strip()


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit].rsplit(" ", 1)[0]
    return cut + " …"


def _closes(text: str) -> str:
    """Reply codes: names and class.method kept, the reply texts (with their names of queues) dropped."""
    def close(m: re.Match[str]) -> str:
        scope, code, name, cls, meth = m.groups()
        return " ".join(x for x in (f"{scope}.close {code}", name, f"{cls}.{meth}" if cls else "") if x)

    text = _CLOSE.sub(close, text)
    text = _CLIENT_CLOSE.sub(lambda m: f"{m.group(1)} close {m.group(2)} {m.group(4).split(' ', 1)[0]}", text)
    return _CLIENT_TEXT.sub(lambda m: f"{m.group(1)} {m.group(3)}", text)


def observed_form(observed: str) -> str:
    """The observed value, normalised (see the module docstring)."""
    return _cut(normalise(_closes(_FRAMES.sub("", observed))), MAX_FORM)


def check_of(message: str) -> str:
    """The failing check: the record's message without its profile source, normalised."""
    return _cut(normalise(_PROFILE.sub("", message)), MAX_CHECK)


def kind_of(verdict: str, form: str) -> str:
    if verdict in REASON_VERDICTS:
        return "reason"
    if verdict == "TIMEOUT":
        return "timeout"
    return next((kind for kind, pattern in _KINDS if pattern.search(form)), "value")


def signature(verdict: str, observed: str, message: str, invariants: Iterable[str] = ()) -> str:
    """The stable signature of a non-PASS record; ``""`` for a PASS (a PASS has no form)."""
    if verdict == "PASS":
        return ""
    check = check_of(message)
    if verdict in REASON_VERDICTS:
        # The reason is the form: what a broker lacks, or that the behaviour was only recorded.
        return f"reason | {check}" if check else "reason"
    invariants = sorted(invariants)
    if invariants:
        # "wire invariant X broken: <detail>; the case itself: <own verdict> <own check>". The detail
        # (which method came after which close) is a race's; the case's own observed value is not
        # in the record: the form is the invariants and the case's own check.
        own = message.rpartition("the case itself:")[2].strip() if "the case itself:" in message else ""
        own_verdict, _, own_check = own.partition(" ")
        if own_verdict not in ("PASS", "FAIL", "NON_STRICT", "INFORMATIONAL", "TIMEOUT", "UNSUPPORTED"):
            own_verdict, own_check = "", own
        head = " ".join(x for x in ("invariant", ",".join(invariants), own_verdict) if x)
        return f"{head} | {check_of(own_check) or '-'}"
    form = observed_form(observed)
    kind = kind_of(verdict, form)
    return f"{kind} {form or '-'} | {check or '-'}"


def check_part(sig: str) -> str:
    """The failing check of a signature (what follows `` | ``)."""
    return sig.partition(" | ")[2]


def form_text(verdict: str, sig: str) -> str:
    return f"{verdict} {sig}".strip()


def parse_form(text: str) -> tuple[str, str]:
    """``"FAIL value 530 | …"`` → ``("FAIL", "value 530 | …")``; ``"TIMEOUT *"`` → ``("TIMEOUT", "*")``."""
    verdict, _, sig = text.strip().partition(" ")
    return verdict.upper(), sig.strip() or ANY


def form_matches(pinned: tuple[str, str], verdict: str, sig: str) -> bool:
    """Same verdict, and the same signature (``*`` pins the verdict only). A record with a broken wire
    invariant does not carry the case's own observed value: against it only the checks compare."""
    p_verdict, p_sig = pinned
    if p_verdict != verdict:
        return False
    if p_sig in (ANY, sig):
        return True
    if p_sig.startswith("invariant ") != sig.startswith("invariant "):
        return bool(check_part(sig)) and check_part(p_sig) == check_part(sig)
    return False
