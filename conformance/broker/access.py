"""RabbitMQ's permission model: users with passwords and, per virtual host, three regular
expressions (configure / write / read) matched against resource names.

The table of which AMQP 0-9-1 operation needs which permission on which resource is RabbitMQ's
access control guide's ("How Permissions Work"), kept here as data (``REQUIRED``); the channel
looks an operation up and asks :meth:`Permissions.check` for each row, in the order RabbitMQ's
channel checks them (rabbit_channel: configure first; a binding checks write on the destination
before read on the source; a new queue's dead-letter exchange: read on the queue, then write on
the DLX).

Rules from the same guide that are not in the table:
- a user with no permissions in a vhost cannot open it (connection.close 530 NOT_ALLOWED);
- the default exchange is checked under the name ``amq.default``;
- an empty regular expression matches nothing (RabbitMQ reads ``""`` as ``^$``);
- the regular expressions are unanchored searches (``re:run``), like Python's ``re.search``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property

from .errors import AMQPError, ReplyCode


class Perm(Enum):
    CONFIGURE = "configure"
    WRITE = "write"
    READ = "read"


#: operation -> ((permission, resource role), ...), in RabbitMQ's check order. A role names the
#: operation's argument the permission is checked on; its kind is ``ROLE_KIND[role]``.
REQUIRED: dict[str, tuple[tuple[Perm, str], ...]] = {
    "exchange.declare": ((Perm.CONFIGURE, "exchange"),),
    "exchange.declare/passive": (),
    "exchange.declare/alternate-exchange": ((Perm.CONFIGURE, "exchange"), (Perm.READ, "exchange"),
                                            (Perm.WRITE, "alternate-exchange")),
    "exchange.delete": ((Perm.CONFIGURE, "exchange"),),
    "queue.declare": ((Perm.CONFIGURE, "queue"),),
    "queue.declare/passive": (),
    "queue.declare/dead-letter-exchange": ((Perm.CONFIGURE, "queue"), (Perm.READ, "queue"),
                                           (Perm.WRITE, "dead-letter-exchange")),
    "queue.delete": ((Perm.CONFIGURE, "queue"),),
    "exchange.bind": ((Perm.WRITE, "destination"), (Perm.READ, "source")),
    "exchange.unbind": ((Perm.WRITE, "destination"), (Perm.READ, "source")),
    "queue.bind": ((Perm.WRITE, "queue"), (Perm.READ, "exchange")),
    "queue.unbind": ((Perm.WRITE, "queue"), (Perm.READ, "exchange")),
    "basic.publish": ((Perm.WRITE, "exchange"),),
    "basic.get": ((Perm.READ, "queue"),),
    "basic.consume": ((Perm.READ, "queue"),),
    "queue.purge": ((Perm.READ, "queue"),),
}

ROLE_KIND: dict[str, str] = {
    "exchange": "exchange", "alternate-exchange": "exchange", "dead-letter-exchange": "exchange",
    "source": "exchange", "destination": "exchange", "queue": "queue",
}

DEFAULT_EXCHANGE_RESOURCE = "amq.default"
FULL = ".*"


def _compile(pattern: str) -> re.Pattern[str]:
    # RabbitMQ (rabbit_auth_backend_internal): an empty permission is "^$", i.e. nothing.
    return re.compile(pattern or "^$")


@dataclass(frozen=True)
class Permissions:
    """One user's configure / write / read regular expressions in one vhost."""

    configure: str = FULL
    write: str = FULL
    read: str = FULL

    def __post_init__(self) -> None:
        for p in (self.configure, self.write, self.read):
            try:
                _compile(p)
            except re.error as exc:
                raise ValueError(f"bad permission regular expression {p!r}: {exc}") from exc

    def pattern(self, perm: Perm) -> str:
        if perm is Perm.CONFIGURE:
            return self.configure
        return self.write if perm is Perm.WRITE else self.read

    def allows(self, perm: Perm, name: str) -> bool:
        return _compile(self.pattern(perm)).search(name) is not None


def resource_name(kind: str, name: str) -> str:
    """The name a permission is matched against: the default exchange is ``amq.default``."""
    return DEFAULT_EXCHANGE_RESOURCE if kind == "exchange" and name == "" else name


def refused(kind: str, name: str, vhost: str, user: str) -> AMQPError:
    """RabbitMQ rabbit_access_control: "access to <resource> refused for user '<user>'"."""
    return AMQPError(
        ReplyCode.ACCESS_REFUSED,
        f"access to {kind} '{resource_name(kind, name)}' in vhost '{vhost}' refused for user '{user}'",
    )


@dataclass(frozen=True)
class Grant:
    """What a connection may do: its user's permissions in the vhost it opened."""

    user: str
    vhost: str
    permissions: Permissions
    tags: frozenset[str] = frozenset()  # the user's tags (RabbitMQ's user tags: impersonator)

    @cached_property
    def unrestricted(self) -> bool:
        p = self.permissions
        return p.configure == p.write == p.read == FULL

    def check(self, operation: str, **names: str) -> None:
        """Raise 403 ACCESS_REFUSED for the first row of ``operation`` the user lacks; ``names``
        gives each role's resource name (``queue=…``, ``exchange=…``, ``source=…``)."""
        if self.unrestricted:
            return  # every name matches ".*" (checked for every publish: keep it cheap)
        for perm, role in REQUIRED[operation]:
            kind = ROLE_KIND[role]
            name = names[role.replace("-", "_")]
            if not self.permissions.allows(perm, resource_name(kind, name)):
                raise refused(kind, name, self.vhost, self.user)


@dataclass
class Users:
    """Users, their passwords and their permissions per vhost."""

    passwords: dict[str, str] = field(default_factory=dict)
    permissions: dict[tuple[str, str], Permissions] = field(default_factory=dict)  # (user, vhost)
    tags: dict[str, frozenset[str]] = field(default_factory=dict)  # user -> tags

    @classmethod
    def full(cls, passwords: Mapping[str, str], vhosts: Iterable[str]) -> Users:
        """Every user with full permissions in every vhost (the broker's default: guest/guest on "/")."""
        vhosts = list(vhosts)
        return cls(dict(passwords), {(u, v): Permissions() for u in passwords for v in vhosts})

    def grant(self, user: str, vhost: str) -> Grant | None:
        p = self.permissions.get((user, vhost))
        return None if p is None else Grant(user, vhost, p, self.tags.get(user, frozenset()))


def parse_user_spec(text: str) -> tuple[str, str, str | None, Permissions | None]:
    """``NAME:PASS`` (no permissions) or ``NAME:PASS:VHOST:CONFIGURE:WRITE:READ`` (the last
    field may contain ``:``; the others may not). Raises ValueError with one line."""
    parts = text.split(":", 5)
    if len(parts) == 2 and parts[0]:
        return parts[0], parts[1], None, None
    if len(parts) == 6 and parts[0]:
        name, password, vhost, conf, write, read = parts
        try:
            return name, password, vhost, Permissions(conf, write, read)
        except ValueError as exc:
            raise ValueError(f"--user {text!r}: {exc}") from exc
    raise ValueError(f"--user {text!r}: expected NAME:PASS or NAME:PASS:VHOST:CONFIGURE:WRITE:READ")
