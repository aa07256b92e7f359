"""The fault-injecting proxy, for the machinery's own tests: it lives in the product now
(:mod:`conformance.protocol.proxy`, behind ``amqp-conformance mutate``); this module keeps the
names the sensitivity tests import and subclass."""

from __future__ import annotations

from conformance.protocol.proxy import (
    FAULTS,
    TO_CLIENT,
    DoubleConfirm,
    ExclusiveIgnored,
    Fault,
    FaultProxy,
    Frame,
    NackMultipleIgnored,
    NoRedeliveredFlag,
    Pause,
    RejectRequeueDropped,
    RollbackCommits,
    SwapDeliveries,
    replace,
)

__all__ = [
    "FAULTS",
    "TO_CLIENT",
    "DoubleConfirm",
    "ExclusiveIgnored",
    "Fault",
    "FaultProxy",
    "Frame",
    "NackMultipleIgnored",
    "NoRedeliveredFlag",
    "Pause",
    "RejectRequeueDropped",
    "RollbackCommits",
    "SwapDeliveries",
    "replace",
]
