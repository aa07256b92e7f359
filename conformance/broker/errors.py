"""AMQP reply codes and the two kinds of protocol error (soft = channel, hard = connection).

Spec (amqp0-9-1.xml, constants): reply codes 3xx/4xx of class "soft-error" close the
channel, those of class "hard-error" close the connection.  RabbitMQ renders every
reply-text as ``"<NAME> - <explanation>"``; we do the same so clients and the suite see
the same strings.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any, TypeVar

from pamqp import commands as spec

#: channel.close or connection.close: the two methods that carry an error to the peer.
CloseMethod = TypeVar("CloseMethod", spec.Channel.Close, spec.Connection.Close)


class ReplyCode(IntEnum):
    REPLY_SUCCESS = 200
    CONTENT_TOO_LARGE = 311
    NO_ROUTE = 312
    NO_CONSUMERS = 313
    CONNECTION_FORCED = 320
    INVALID_PATH = 402
    ACCESS_REFUSED = 403
    NOT_FOUND = 404
    RESOURCE_LOCKED = 405
    PRECONDITION_FAILED = 406
    FRAME_ERROR = 501
    SYNTAX_ERROR = 502
    COMMAND_INVALID = 503
    CHANNEL_ERROR = 504
    UNEXPECTED_FRAME = 505
    RESOURCE_ERROR = 506
    NOT_ALLOWED = 530
    NOT_IMPLEMENTED = 540
    INTERNAL_ERROR = 541


#: spec: ``<constant name="..." value="..." class="soft-error"/>``
SOFT_ERRORS = frozenset(
    {
        ReplyCode.CONTENT_TOO_LARGE,
        ReplyCode.NO_ROUTE,
        ReplyCode.NO_CONSUMERS,
        ReplyCode.ACCESS_REFUSED,
        ReplyCode.NOT_FOUND,
        ReplyCode.RESOURCE_LOCKED,
        ReplyCode.PRECONDITION_FAILED,
    }
)


class AMQPError(Exception):
    """A protocol error raised by a method handler.

    ``class_id``/``method_id`` name the offending method (spec: connection.close and
    channel.close carry them "when the close is provoked by a method exception").
    Whether it closes the channel or the connection follows from the reply code.
    """

    def __init__(self, code: ReplyCode, explanation: str, class_id: int = 0, method_id: int = 0) -> None:
        self.code = ReplyCode(code)
        self.explanation = explanation
        self.class_id = class_id
        self.method_id = method_id
        super().__init__(self.reply_text)

    @property
    def reply_text(self) -> str:
        text = f"{self.code.name} - {self.explanation}"
        # reply-text is a shortstr: at most 255 octets on the wire.
        return text.encode("utf-8")[:255].decode("utf-8", "ignore")

    @property
    def is_hard(self) -> bool:
        return self.code not in SOFT_ERRORS

    def with_method(self, class_id: int, method_id: int) -> AMQPError:
        if not self.class_id and not self.method_id:
            self.class_id, self.method_id = class_id, method_id
        return self

    def close_method(self, close: type[CloseMethod]) -> CloseMethod:
        """The channel.close or connection.close (``close``) that reports this error."""
        return close(
            reply_code=int(self.code),
            reply_text=self.reply_text,
            class_id=self.class_id,
            method_id=self.method_id,
        )


def soft(code: ReplyCode, explanation: str) -> AMQPError:
    return AMQPError(code, explanation)


def not_found(kind: str, name: str, vhost: str) -> AMQPError:
    return AMQPError(ReplyCode.NOT_FOUND, f"no {kind} '{name}' in vhost '{vhost}'")


def precondition(explanation: str) -> AMQPError:
    return AMQPError(ReplyCode.PRECONDITION_FAILED, explanation)


# -- RabbitMQ's error texts (rabbit_misc:rs/1 and the channel's messages), in one place ------


def rs_queue(vhost: str, name: str) -> str:
    return f"queue '{name}' in vhost '{vhost}'"


def rs_exchange(vhost: str, name: str) -> str:
    return f"exchange '{name}' in vhost '{vhost}'"


def default_exchange_refused() -> AMQPError:
    return AMQPError(ReplyCode.ACCESS_REFUSED, "operation not permitted on the default exchange")


def method_frame_expected() -> AMQPError:
    """A content frame where the channel's assembler expects a method frame."""
    return AMQPError(ReplyCode.UNEXPECTED_FRAME, "expected method frame, got non method frame instead")


def unknown_delivery_tag(tag: int) -> AMQPError:
    return AMQPError(ReplyCode.PRECONDITION_FAILED, f"unknown delivery tag {tag}")


def not_transactional() -> AMQPError:
    return AMQPError(ReplyCode.PRECONDITION_FAILED, "channel is not transactional")


def amqp_type_name(value: Any) -> str:
    # RabbitMQ names field types in its inequivalence messages; pamqp hands us Python
    # values, so this is the closest name for the value rather than the exact wire type.
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        # the type pamqp (and so most Python clients) picks for the value
        for low, high, name in (
            (-(2**7), 2**7 - 1, "byte"),
            (-(2**15), 2**15 - 1, "short"),
            (0, 2**16 - 1, "unsignedshort"),
            (-(2**31), 2**31 - 1, "signedint"),
            (0, 2**32 - 1, "unsignedint"),
        ):
            if low <= value <= high:
                return name
        return "long"
    if isinstance(value, str):
        return "longstr"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return "table"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def fmt_arg(value: Any) -> str:
    if value is None:
        return "none"
    shown = str(value).lower() if isinstance(value, bool) else value
    return f"the value '{shown}' of type '{amqp_type_name(value)}'"


def inequivalent(key: str, where: str, got: Any, have: Any) -> AMQPError:
    # RabbitMQ 3.10: "received '2000' but current is '1000'" when both are set, the
    # typed form when one side is missing.
    if got is not None and have is not None:
        g = str(got).lower() if isinstance(got, bool) else got
        h = str(have).lower() if isinstance(have, bool) else have
        return precondition(f"inequivalent arg '{key}' for {where}: received '{g}' but current is '{h}'")
    return precondition(
        f"inequivalent arg '{key}' for {where}: received {fmt_arg(got)} but current is {fmt_arg(have)}"
    )
