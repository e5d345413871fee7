"""proton-broker: an AMQP 1.0 message broker with Qpid queue semantics, built on Qpid Proton."""

__version__ = "0.1.0"
