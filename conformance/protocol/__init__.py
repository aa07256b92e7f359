"""The AMQP 0-9-1 protocol client: a raw connection, its channels, frames and events, the
handshake, URIs and TLS. It raises its own exceptions (``conformance.protocol.errors``) and knows
nothing of verdicts, cases, the plugin or pytest: usable on its own."""
