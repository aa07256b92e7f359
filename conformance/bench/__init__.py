"""Benchmarks: ``amqp-conformance bench broker`` (a load generator run side by side against brokers)
and ``bench report`` (the report pipeline at scale, in conformance.report.bench)."""
