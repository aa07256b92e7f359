"""The faults workload: Jepsen's queue test in our terms (clients, nemesis, checker) against a
cluster target."""
