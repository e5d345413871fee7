"""``proton-broker-config``: a qpid-config-style tool, a plain AMQP client of ``$management``."""
