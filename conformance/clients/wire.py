"""The wire vocabulary of the suite's clients: the protocol header, reply-code names, method
names, broker URLs and the one describer of a frame.

Everything here is pure (no sockets). The reference broker keeps its own copy of these
constants on purpose: the system under test must not share code with the suite that judges it.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from pamqp import commands as spec
from pamqp import constants as pconstants
from pamqp import exceptions as pexceptions

# "AMQP" then protocol id 0 and version 0-9-1 (amqp0-9-1.xml, section "protocol header").
PROTOCOL_HEADER = pconstants.AMQP + bytes((0, 0, 9, 1))
FRAME_END = bytes((pconstants.FRAME_END,))

# pamqp names every error reply code (e.g. "NOT-FOUND"); the spec XML spells constants with "-",
# the suite's texts with "_" as RabbitMQ's logs do. 200 is a success, not an error, so pamqp has
# no exception class for it.
REPLY_NAMES: dict[int, str] = {
    pconstants.REPLY_SUCCESS: "REPLY_SUCCESS",
    **{code: getattr(cls, "name", cls.__name__).replace("-", "_") for code, cls in pexceptions.CLASS_MAPPING.items()},
}


def reply_name(code: int | None) -> str:
    """``404 NOT_FOUND`` (``? `` for a code the spec does not define)."""
    return f"{code} {REPLY_NAMES.get(code or 0, '?')}"


def method_name_from_text(name: str) -> str:
    """``Basic.GetOk`` → ``basic.get-ok``."""
    cls, _, meth = name.partition(".")
    out = []
    for i, ch in enumerate(meth):
        if ch.isupper() and i:
            out.append("-")
        out.append(ch.lower())
    return f"{cls.lower()}.{''.join(out)}"


def method_name(method: Any) -> str:
    """``basic.ack`` style name of a pamqp method instance or class."""
    return method_name_from_text(getattr(method, "name", type(method).__name__))


CLOSES = (spec.Channel.Close, spec.Connection.Close)


def describe(frm: Any, body: bytes | None = None) -> str:
    """The one describer of what a peer sent: a method (with the fields that tell it apart),
    a content body when it carried one, another frame by its type, ``None`` as the socket's end."""
    if frm is None:
        return "socket ended"
    if isinstance(frm, CLOSES):
        return (f"{method_name(frm)} {reply_name(frm.reply_code)} {frm.reply_text!r}"
                f" (class {frm.class_id}, method {frm.method_id})")
    if isinstance(frm, (spec.Basic.Ack, spec.Basic.Nack)):
        return f"{method_name(frm)} tag={frm.delivery_tag} multiple={frm.multiple}"
    if isinstance(frm, spec.Basic.Deliver):
        return f"{method_name(frm)} tag={frm.delivery_tag} redelivered={frm.redelivered} body={body!r}"
    if isinstance(frm, spec.Basic.Return):
        return f"{method_name(frm)} {reply_name(frm.reply_code)} body={body!r}"
    if hasattr(frm, "name"):
        return method_name(frm)
    return type(frm).__name__


def short_method(frm: Any, *, names: bool = True) -> str:
    """The comparable short form: ``channel.close 405 RESOURCE_LOCKED`` (``names=False``:
    ``channel.close 405``, the form the probe-outcome tables match with wildcards),
    ``basic.return 312 NO_ROUTE``, ``queue.declare-ok``; ``None`` is ``socket closed``."""
    if frm is None:
        return "socket closed"
    if isinstance(frm, (*CLOSES, spec.Basic.Return)):
        code = frm.reply_code
        return f"{method_name(frm)} {reply_name(code) if names else code}"
    return method_name(frm)


@dataclass(frozen=True)
class URL:
    host: str
    port: int
    user: str
    password: str
    vhost: str

    @classmethod
    def parse(cls, url: str) -> URL:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("amqp", ""):
            raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {redact(url)} (use amqp://)")
        if not parts.hostname:
            raise ValueError(f"no host in broker URL {redact(url)!r} (expected amqp://user:pass@host:port/vhost)")
        try:
            port = parts.port or 5672
        except ValueError as exc:
            raise ValueError(f"bad port in broker URL {redact(url)!r}") from exc
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        vhost = urllib.parse.unquote(path) if path else "/"
        return cls(
            host=parts.hostname,
            port=port,
            user=urllib.parse.unquote(parts.username or "guest"),
            password=urllib.parse.unquote(parts.password or "guest"),
            vhost=vhost,
        )


def redact(url: str) -> str:
    """The URL without its password, for messages and results."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
