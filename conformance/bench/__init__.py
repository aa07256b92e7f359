"""``amqp-conformance bench broker``: a load generator run side by side against brokers. The
benchmarks of this project's own code (report pipeline, crash soak, memory flood) live in the
source checkout's ``benchmarks/``, not in the package."""
