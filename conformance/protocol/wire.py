"""The wire vocabulary of the suite's clients: the protocol header, reply-code names, method
names, broker URLs and the one describer of a frame.

Everything here is pure (no sockets). The reference broker keeps its own copy of these
constants on purpose: the system under test must not share code with the suite that judges it.
"""

from __future__ import annotations

import dataclasses
import functools
import ssl
import struct
import urllib.parse
from dataclasses import dataclass
from typing import Any, TypeVar

from pamqp import commands as spec
from pamqp import constants as pconstants
from pamqp import exceptions as pexceptions

# "AMQP" then protocol id 0 and version 0-9-1 (amqp0-9-1.xml, section "protocol header").
PROTOCOL_HEADER = pconstants.AMQP + bytes((0, 0, 9, 1))
FRAME_END = bytes((pconstants.FRAME_END,))

#: the methods that carry content (a header frame and body frames follow them)
CONTENT_METHODS = (spec.Basic.Deliver, spec.Basic.GetOk, spec.Basic.Return)


def split_frames(buf: bytes) -> tuple[list[bytes], bytes]:
    """The whole frames at the start of ``buf`` (each with its frame-end octet) and the rest.
    A frame is a 7-octet header (type, channel, payload size), the payload and frame-end."""
    frames: list[bytes] = []
    while len(buf) >= 7:
        size = struct.unpack(">I", buf[3:7])[0]
        if len(buf) < size + 8:
            break
        frames.append(buf[: size + 8])
        buf = buf[size + 8:]
    return frames, buf


def pack_frame(frame_type: int, channel: int, payload: bytes) -> bytes:
    """One frame from its parts, as they are (a hand-made frame: any type, any payload)."""
    return struct.pack(">BHI", frame_type, channel, len(payload)) + payload + FRAME_END


# pamqp names every error reply code (e.g. "NOT-FOUND"); the spec XML spells constants with "-",
# the suite's texts with "_" as RabbitMQ's logs do. 200 is a success, not an error, so pamqp has
# no exception class for it.
REPLY_NAMES: dict[int, str] = {
    pconstants.REPLY_SUCCESS: "REPLY_SUCCESS",
    **{
        code: getattr(cls, "name", cls.__name__).replace("-", "_")
        for code, cls in pexceptions.CLASS_MAPPING.items()
    },
}


_T = TypeVar("_T")


def decoded(value: _T | None) -> _T:
    """A field of a method decoded from the wire.  pamqp types some fields ``X | None``
    because its constructors default them to None; ``unmarshal`` always sets them."""
    if value is None:
        raise AssertionError("a decoded method field is unset")
    return value


def reply_name(code: int | None) -> str:
    """``404 NOT_FOUND`` (``? `` for a code the spec does not define)."""
    return f"{code} {REPLY_NAMES.get(code or 0, '?')}"


@functools.cache  # a few dozen names, asked for on every frame a case describes
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


DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}
# The query options of RabbitMQ's "URI Query Parameters" page (Erlang client) this client honours.
# TLS ones only make sense with amqps://. fail_if_no_peer_cert and depth are server-side or
# Erlang-only knobs Python's ssl module cannot express: they are refused rather than ignored.
INT_OPTIONS = ("heartbeat", "frame_max", "channel_max", "connection_timeout")
TLS_OPTIONS = ("cacertfile", "certfile", "keyfile", "password", "verify", "server_name_indication")
OPTIONS = (*INT_OPTIONS, "auth_mechanism", *TLS_OPTIONS)
MECHANISMS = ("PLAIN", "AMQPLAIN", "EXTERNAL")
VERIFY = {"verify_peer": True, "verify_none": False}


def _unquote(text: str, what: str, url: str) -> str:
    # errors="strict": an escape that is not UTF-8 is a bad URL, not a replacement character.
    try:
        return urllib.parse.unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what} in {redact(url)} is not percent-encoded UTF-8") from exc


@dataclass(frozen=True)
class URL:
    """A broker address per RabbitMQ's AMQP URI specification (https://www.rabbitmq.com/uri-spec.html)
    and its query parameters (https://www.rabbitmq.com/docs/uri-query-parameters).

    Defaults for absent parts: host ``localhost``, port 5672 (amqp) / 5671 (amqps), user and
    password ``guest``, vhost ``/``; ``amqp://host/%2f`` names ``/``; user, password, host and
    vhost are percent-decoded (pika leaves a host's escapes alone: the spec's way is taken here).

    Two deliberate differences from the specification's examples: ``amqp://host/`` (an empty
    path) is the vhost ``/``, not the empty vhost, because pika and aiormq read it so and the
    suite's raw client must reach the same vhost as its pika and aio-pika cases for the same URL
    (every target's URL ends in ``/``); and TLS verification is on unless the URL says
    ``verify=verify_none`` (RabbitMQ's Erlang client defaults to no verification).
    """

    host: str = "localhost"
    port: int = 5672
    user: str = "guest"
    password: str = "guest"
    vhost: str = "/"
    scheme: str = "amqp"
    heartbeat: int | None = None  # seconds
    frame_max: int | None = None
    channel_max: int | None = None
    connection_timeout: float | None = None  # seconds (the URL gives milliseconds)
    auth_mechanisms: tuple[str, ...] = ()  # the client's preference order; () means PLAIN
    cacertfile: str | None = None
    certfile: str | None = None
    keyfile: str | None = None
    key_password: str | None = None
    verify: bool = True
    server_name_indication: str | None = None  # None: the host; "disable": no SNI, no name check

    @property
    def tls(self) -> bool:
        return self.scheme == "amqps"

    @classmethod
    def parse(cls, url: str) -> URL:
        """Parse ``url``; ValueError with one line naming what is wrong (the password redacted)."""
        try:
            parts = urllib.parse.urlsplit(url)
        except ValueError as exc:  # e.g. an unclosed "[" of an IPv6 literal
            raise ValueError(f"malformed broker URL {redact(url)!r}: {exc}") from exc
        scheme = parts.scheme or "amqp"
        if scheme not in DEFAULT_PORTS:
            raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {redact(url)} (use amqp:// or amqps://)")
        if parts.fragment:
            raise ValueError(f"a broker URL has no fragment: {redact(url)}")
        try:
            port = parts.port
        except ValueError as exc:
            raise ValueError(f"bad port in broker URL {redact(url)!r}") from exc
        if port == 0:
            raise ValueError(f"bad port in broker URL {redact(url)!r}")
        netloc_host = parts.netloc.rpartition("@")[2]
        host = parts.hostname or ""
        if not netloc_host.startswith("["):
            # hostname is lower-cased but not unquoted; the spec allows percent-encoded hosts.
            host = _unquote(netloc_host.rsplit(":", 1)[0] if ":" in netloc_host else netloc_host, "host", url)
        if parts.path in ("", "/"):
            vhost = "/"  # pika and aiormq read "amqp://host/" so too (see the class docstring)
        else:
            segment = parts.path[1:]
            if "/" in segment:
                raise ValueError(f"the vhost in {redact(url)} has an unencoded '/' (write it as %2F)")
            vhost = _unquote(segment, "vhost", url)
        fields: dict[str, Any] = {
            "scheme": scheme,
            "host": host or "localhost",
            "port": port or DEFAULT_PORTS[scheme],
            "user": "guest" if parts.username is None else _unquote(parts.username, "user", url),
            "password": "guest" if parts.password is None else _unquote(parts.password, "password", url),
            "vhost": vhost,
        }
        fields.update(_query_options(parts.query, scheme, url))
        return cls(**fields)

    def with_(self, **changes: Any) -> URL:
        """A copy with some parts changed (``u.with_(vhost="other")``)."""
        return dataclasses.replace(self, **changes)

    def __str__(self) -> str:
        """The URL again, every part spelled out (a password shown: use :func:`redact` for messages)."""
        q = _quote
        host = f"[{self.host}]" if ":" in self.host else q(self.host)
        query: list[tuple[str, str]] = []
        for name in INT_OPTIONS:
            value = getattr(self, name)
            if value is not None:
                query.append((name, str(round(value * 1000) if name == "connection_timeout" else value)))
        query += [("auth_mechanism", m.lower()) for m in self.auth_mechanisms]
        for name, attr in (
            ("cacertfile", "cacertfile"),
            ("certfile", "certfile"),
            ("keyfile", "keyfile"),
            ("password", "key_password"),
            ("server_name_indication", "server_name_indication"),
        ):
            if getattr(self, attr) is not None:
                query.append((name, getattr(self, attr)))
        if self.tls and not self.verify:
            query.append(("verify", "verify_none"))
        tail = f"?{urllib.parse.urlencode(query)}" if query else ""
        return f"{self.scheme}://{q(self.user)}:{q(self.password)}@{host}:{self.port}/{q(self.vhost)}{tail}"

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context the URL asks for (None for amqp://); ValueError for a file
        that cannot be read. One context per URL, shared: loading the system's CA store costs
        about 30 ms, and a run opens thousands of connections."""
        return _ssl_context(self) if self.tls else None

    def _new_ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        try:
            if self.cacertfile:
                ctx.load_verify_locations(cafile=self.cacertfile)
            if self.certfile:
                ctx.load_cert_chain(self.certfile, self.keyfile, password=self.key_password)
        except (OSError, ssl.SSLError) as exc:
            raise ValueError(f"cannot load the TLS files named in the URL: {exc}") from exc
        if not self.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        elif self.server_name_indication == "disable":
            ctx.check_hostname = False  # the chain is still verified; there is no name to check
        return ctx

    @property
    def tls_server_name(self) -> str | None:
        """The name sent as SNI and checked against the certificate."""
        if self.server_name_indication == "disable":
            return None
        return self.server_name_indication or self.host


@functools.lru_cache(maxsize=16)
def _ssl_context(u: URL) -> ssl.SSLContext:
    return u._new_ssl_context()  # a failure (ValueError) is not cached: lru_cache keeps results only


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="")


def _query_options(query: str, scheme: str, url: str) -> dict[str, Any]:
    """The URL's query options as URL fields; one clear ValueError for an unknown or bad one."""
    out: dict[str, Any] = {}
    mechanisms: list[str] = []
    try:
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query),
                                       errors="strict")
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"malformed query in broker URL {redact(url)}") from exc
    for name, value in pairs:
        key, parsed = _query_option(name, value, scheme, url)
        if key == "auth_mechanisms":
            mechanisms.append(parsed)
        else:
            out[key] = parsed
    if mechanisms:
        out["auth_mechanisms"] = tuple(mechanisms)
    if out.get("connection_timeout") == 0:
        raise ValueError("URL option connection_timeout=0 would give no time to connect")
    if "keyfile" in out and "certfile" not in out:
        raise ValueError("URL option keyfile needs certfile too")
    return out


def _query_option(name: str, value: str, scheme: str, url: str) -> tuple[str, Any]:
    """One query option as (URL field, value); ``auth_mechanisms`` takes one mechanism a time."""
    if name not in OPTIONS:
        raise ValueError(f"unknown URL option {name!r} in {redact(url)} (known: {', '.join(OPTIONS)})")
    if name in TLS_OPTIONS and scheme != "amqps":
        raise ValueError(f"URL option {name!r} needs amqps:// ({redact(url)})")
    if name in INT_OPTIONS:
        try:
            number = int(value)
        except ValueError as exc:
            raise ValueError(f"URL option {name}={value!r} is not a whole number") from exc
        if number < 0:
            raise ValueError(f"URL option {name}={value!r} is negative")
        return name, number / 1000 if name == "connection_timeout" else number
    if name == "auth_mechanism":
        mech = value.upper()
        if mech not in MECHANISMS:
            raise ValueError(f"URL option auth_mechanism={value!r} is not one of "
                             f"{', '.join(m.lower() for m in MECHANISMS)}")
        return "auth_mechanisms", mech
    if name == "verify":
        if value not in VERIFY:
            raise ValueError(f"URL option verify={value!r} is not verify_peer or verify_none")
        return "verify", VERIFY[value]
    if name == "password":
        return "key_password", value
    if not value:
        raise ValueError(f"URL option {name} is empty")
    return name, value


def redact(url: str | URL | None) -> str:
    """The URL without its passwords (the login's and a TLS key's ``password=`` option), for
    messages and results."""
    if url is None:
        return ""
    url = str(url)
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparseable URL>"
    if parts.password is not None:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
        parts = parts._replace(netloc=netloc)
    if parts.query:
        query = "&".join("password=***" if pair.split("=", 1)[0] == "password" else pair
                         for pair in parts.query.split("&"))
        parts = parts._replace(query=query)
    return urllib.parse.urlunsplit(parts)
