"""The reference broker's versions: its own (the package's, conformance.__version__) and the RabbitMQ
release whose semantics it implements, which it states in server-properties' ``version``.

Clients read ``version`` to choose between RabbitMQ code paths (the release they compare with), so
that is where the broker states RabbitMQ 3.10.8 compatibility; ``product`` stays
"amqp-conformance reference broker", so a client that checks for ``product == "RabbitMQ"`` is not
misled, and ``information`` carries the broker's own version (README.md, "server-properties").
"""

from conformance import __version__

#: the RabbitMQ release whose semantics the broker implements (and was measured against)
RABBITMQ_COMPATIBLE = "3.10.8"

__all__ = ["RABBITMQ_COMPATIBLE", "__version__"]
