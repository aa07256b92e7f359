"""The broker's limits, as RabbitMQ 3.10 has them (and its configuration keys name them):
negotiated frame and channel maxima, the largest message, the number of connections, the
memory high watermark behind ``connection.blocked``, and the consumer (delivery
acknowledgement) timeout.

The memory alarm counts what a publisher flood grows: the bodies of the messages queues
hold (ready and unacknowledged). RabbitMQ's ``vm_memory_high_watermark`` measures the
whole VM instead; a forced alarm (``Broker.force_alarm``, signal SIGUSR1 of the broker
command) stands in for ``rabbitmqctl set_vm_memory_high_watermark`` so a client-visible
alarm can be raised without filling memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: RabbitMQ 3.10 defaults (rabbitmq.conf: frame_max, channel_max, max_message_size).
DEFAULT_FRAME_MAX = 131072
DEFAULT_CHANNEL_MAX = 2047
DEFAULT_MAX_MESSAGE_SIZE = 134217728
#: RabbitMQ 3.10's consumer_timeout (rabbitmq.conf, milliseconds; deps/rabbit/Makefile): a delivery
#: left unacknowledged longer closes its channel with 406 (rabbit_channel:evaluate_consumer_timeout).
DEFAULT_CONSUMER_TIMEOUT = 1_800_000
#: RabbitMQ's hard ceiling for max_message_size (512 MiB): a larger setting is clamped.
MAX_MESSAGE_SIZE_CEILING = 536870912
#: The reason text RabbitMQ puts in connection.blocked for a memory alarm.
MEMORY_ALARM_REASON = "low on memory"


@dataclass(frozen=True)
class Limits:
    frame_max: int = DEFAULT_FRAME_MAX  # offered in connection.tune; 0 = no limit is never offered
    channel_max: int = DEFAULT_CHANNEL_MAX
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_connections: int = 0  # 0: unlimited
    memory_watermark: int = 0  # bytes of queued message bodies; 0: no memory alarm
    consumer_timeout: int = DEFAULT_CONSUMER_TIMEOUT  # ms a delivery may stay unacked; 0: no timeout

    def __post_init__(self) -> None:
        if not 4096 <= self.frame_max <= 2**32 - 1:
            raise ValueError(f"frame_max {self.frame_max} is outside [4096, 4294967295]")
        if not 1 <= self.channel_max <= 65535:
            raise ValueError(f"channel_max {self.channel_max} is outside [1, 65535]")
        if not 0 < self.max_message_size <= MAX_MESSAGE_SIZE_CEILING:
            raise ValueError(
                f"max_message_size {self.max_message_size} is outside [1, {MAX_MESSAGE_SIZE_CEILING}]"
            )
        if self.max_connections < 0 or self.memory_watermark < 0 or self.consumer_timeout < 0:
            raise ValueError("max_connections, memory_watermark and consumer_timeout must not be negative")


_SIZE = re.compile(r"(\d+)\s*([kmg]i?b?|b)?", re.IGNORECASE)
_UNITS = {"": 1, "b": 1, "k": 1000, "kb": 1000, "kib": 1024, "ki": 1024, "m": 1000**2, "mb": 1000**2,
          "mib": 1024**2, "mi": 1024**2, "g": 1000**3, "gb": 1000**3, "gib": 1024**3, "gi": 1024**3}


def parse_size(text: str) -> int:
    """``200MB`` → 200000000, ``1MiB`` → 1048576, ``4096`` → 4096 (RabbitMQ's information
    units); ValueError (one line) otherwise."""
    m = _SIZE.fullmatch(text.strip())
    unit = (m.group(2) or "").lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a size (e.g. 4096, 200MB, 1MiB)")
    return int(m.group(1)) * _UNITS[unit]
