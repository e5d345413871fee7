"""Persistence: durable queue definitions and messages (see :mod:`proton_broker.store.base`)."""
