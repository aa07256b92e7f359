"""Benchmarks of this project's own code (the report pipeline on synthetic data, the reference
broker's crash soak and memory watermark). Not part of the installed package: ``amqp-conformance
bench report|crash|flood`` reach them from a source checkout; ``bench broker`` (brokers side by
side) is a product feature and lives in ``conformance.bench``."""
