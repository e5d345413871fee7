"""The Proton-free AMQP 1.0 codec, shared by the protocol adapter, the HTTP gateway and the
domain: :mod:`~proton_broker.codec.values` (the type system), :mod:`~proton_broker.codec.sections`
(read and validate a message once, into the broker's record) and
:mod:`~proton_broker.codec.encode` (the bytes the broker changes). Import from the
submodules; this package re-exports nothing, so that the message record can use the type
system without an import circle."""
