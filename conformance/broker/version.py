"""The reference broker's versions: its own (the package's, conformance.__version__) and the RabbitMQ
release whose semantics it implements, which it states in server-properties' ``version``.

Clients read ``version`` to choose between RabbitMQ code paths (the release they compare with), so
that is where the broker states RabbitMQ 3.10.8 compatibility; ``product`` stays
"amqp-conformance reference broker", so a client that checks for ``product == "RabbitMQ"`` is not
misled, and ``information`` carries the broker's own version (README.md, "server-properties").
"""

import platform
from typing import Any

from conformance import __version__

#: the RabbitMQ release whose semantics the broker implements (and was measured against)
RABBITMQ_COMPATIBLE = "3.10.8"



def server_properties() -> dict[str, Any]:
    return {
        "product": "amqp-conformance reference broker",
        # what clients compare with RabbitMQ releases; the broker's own version is in "information"
        "version": RABBITMQ_COMPATIBLE,
        "platform": f"Python {platform.python_version()}",
        "copyright": "amqp-conformance contributors",
        "information": (
            f"amqp-conformance reference broker {__version__}, implementing RabbitMQ "
            f"{RABBITMQ_COMPATIBLE} semantics"
        ),
        # advertise only what is implemented (RabbitMQ's capability names); the suite's raw client
        # has a list like it of its own: the broker shares no code with the suite (see __init__)
        "capabilities": {
            "publisher_confirms": True,
            "exchange_exchange_bindings": True,
            "basic.nack": True,
            "consumer_cancel_notify": True,
            "connection.blocked": True,
            "consumer_priorities": True,
            "authentication_failure_close": True,
            "per_consumer_qos": True,
            "direct_reply_to": True,
        },
    }


__all__ = ["RABBITMQ_COMPATIBLE", "__version__", "server_properties"]

