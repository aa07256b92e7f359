"""The amqp-conformance reference broker: AMQP 0-9-1 with RabbitMQ 3.x semantics.

``EmbeddedBroker`` runs it in a background thread (tests); ``python -m
conformance.broker`` runs it as a process (see ``cli.py``).

The broker keeps its own wire code (framing, protocol header, capability tables, reply texts)
and imports nothing from the suite's client (``conformance.protocol``, ``conformance.verify``), even
where the two look alike: a broker and the suite that judges it must not share a bug. The duplicate scan's
broker-vs-clients rows are left for that reason.
"""

from .server import BrokerServer, EmbeddedBroker
from .version import __version__

__all__ = ["BrokerServer", "EmbeddedBroker", "__version__"]
