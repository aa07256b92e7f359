"""The connection handshake's decisions, apart from the connection's state and framing
(``connection.py``): the ``connection.start`` the broker offers, the credentials a
``start-ok`` carries, the ``tune-ok`` negotiation and the ``connection.open`` checks, each with
RabbitMQ 3.10's reply codes and texts (rabbit_reader, rabbit_access_control)."""

from __future__ import annotations

import struct

from pamqp import commands as spec
from pamqp import decode

from .access import Grant
from .errors import AMQPError, ReplyCode
from .frames import FRAME_MIN_SIZE
from .model import Broker, VHost
from .version import server_properties

MECHANISMS = "PLAIN AMQPLAIN"


def start_method() -> spec.Connection.Start:
    return spec.Connection.Start(
        version_major=0,
        version_minor=9,
        server_properties=server_properties(),
        mechanisms=MECHANISMS,
        locales="en_US",
    )


def credentials(mech: str, response: str | bytes) -> tuple[str, str]:
    """(user, password) from a start-ok's mechanism and response."""
    raw = response.encode("utf-8") if isinstance(response, str) else bytes(response)
    if mech == "PLAIN":
        parts = raw.split(b"\x00")
        if len(parts) != 3:
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "PLAIN login refused: malformed response")
        return parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if mech == "AMQPLAIN":
        try:
            _, table = decode.field_table(struct.pack(">I", len(raw)) + raw)
        except Exception as exc:
            raise AMQPError(ReplyCode.ACCESS_REFUSED, "AMQPLAIN login refused: malformed response") from exc
        return str(table.get("LOGIN", "")), str(table.get("PASSWORD", ""))
    raise AMQPError(ReplyCode.COMMAND_INVALID, f"unknown authentication mechanism '{mech}'")


def login(broker: Broker, m: spec.Connection.StartOk) -> str:
    """The authenticated user, or 403 with RabbitMQ's login-refused text."""
    user, password = credentials(m.mechanism, m.response)
    if not broker.authenticate(user, password):
        raise AMQPError(
            ReplyCode.ACCESS_REFUSED,
            f"Login was refused using authentication mechanism {m.mechanism}. For details see the broker "
            "logfile.",
        )
    return user


def tune_method(broker: Broker, heartbeat: int) -> spec.Connection.Tune:
    limits = broker.limits
    return spec.Connection.Tune(
        channel_max=limits.channel_max, frame_max=limits.frame_max, heartbeat=heartbeat
    )


def check_tune_ok(broker: Broker, m: spec.Connection.TuneOk) -> None:
    """RabbitMQ validate_negotiated_integer_value: 530 NOT_ALLOWED outside [min, server max]."""
    for field_name, value, low, high in (
        ("frame_max", m.frame_max, FRAME_MIN_SIZE, broker.limits.frame_max),
        ("channel_max", m.channel_max, 1, broker.limits.channel_max),
    ):
        if value != 0 and value < low:
            raise AMQPError(
                ReplyCode.NOT_ALLOWED,
                f"negotiated {field_name} = {value} is lower than the minimum allowed value ({low})",
            )
        if value == 0 or value > high:
            raise AMQPError(
                ReplyCode.NOT_ALLOWED,
                f"negotiated {field_name} = {value} is higher than the maximum allowed value ({high})",
            )


def open_vhost(broker: Broker, user: str, name: str) -> tuple[VHost, Grant]:
    """The vhost a connection.open names and the user's permissions there, or 530."""
    vh = broker.vhosts.get(name)
    if vh is None:
        raise AMQPError(ReplyCode.NOT_ALLOWED, f"vhost {name} not found")
    grant = broker.users.grant(user, vh.name)
    if grant is None:
        # RabbitMQ access control guide: a user without permissions in a vhost cannot
        # connect to it (rabbit_access_control:check_vhost_access → 530 NOT_ALLOWED).
        raise AMQPError(ReplyCode.NOT_ALLOWED, f"access to vhost '{vh.name}' refused for user '{user}'")
    limit = broker.limits.max_connections
    if limit and broker.open_connections >= limit:
        # RabbitMQ's connection-limit refusal (its vhost max-connections text)
        raise AMQPError(
            ReplyCode.NOT_ALLOWED,
            f"access to vhost '{name}' refused for user '{user}': connection limit ({limit}) is reached",
        )
    return vh, grant
