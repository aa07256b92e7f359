"""The amqp-conformance reference broker: AMQP 0-9-1 with RabbitMQ 3.x semantics.

``EmbeddedBroker`` runs it in a background thread (tests); ``python -m
conformance.broker`` runs it as a process (see ``cli.py``).
"""

from .server import BrokerServer, EmbeddedBroker
from .version import __version__

__all__ = ["BrokerServer", "EmbeddedBroker", "__version__"]
