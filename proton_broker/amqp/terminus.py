"""Reading and echoing link termini (source/target) the way Qpid clients expect.

Capabilities arrive as a bare symbol or as an array of symbols (qpid::messaging sends one
capability bare); both are read. The reply echoes only the capabilities the broker honours,
because ``qpid::messaging``'s ``assert`` option checks the echo.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proton import Array, Data, Terminus, symbol


def capabilities_of(terminus: Terminus) -> list[str]:
    """The capabilities on ``terminus`` as plain strings, whatever their encoding."""
    return _symbols(_value(terminus.capabilities))


def _value(data: Data) -> Any:
    data.rewind()
    if not data.next():
        return None
    return data.get_object()


def _symbols(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, Array):
        return [str(v) for v in value.elements]
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return [str(value)]


def echo_terminus(
    local: Terminus, remote: Terminus, address: str | None, honoured: Iterable[str]
) -> None:
    """Fill our side of the attach: the node address and the capabilities we honour."""
    local.address = address
    local.durability = remote.durability
    local.expiry_policy = remote.expiry_policy
    local.timeout = remote.timeout
    keep = [c for c in capabilities_of(remote) if c in set(honoured)]
    if keep:
        local.capabilities.put_array(False, Data.SYMBOL)
        local.capabilities.enter()
        for cap in keep:
            local.capabilities.put_symbol(symbol(cap))
        local.capabilities.exit()
