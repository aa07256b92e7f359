"""amqp-conformance: an AMQP 0-9-1 conformance suite that can be pointed at any broker."""

__version__ = "0.1.0"
