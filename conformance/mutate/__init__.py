"""Mutation testing: the suite proves its own power by killing injected broker faults.

A fault-injecting AMQP proxy (:mod:`conformance.protocol.proxy`) sits in front of a good broker
and breaks one promise at a time; the catalogue (:mod:`conformance.mutate.catalogue`) names
each broken promise and the rule it violates; the runner (:mod:`conformance.mutate.runner`,
``amqp-conformance mutate``) runs the scenario modules that can observe each mutant through the
proxy and reports which cases killed it.
"""
