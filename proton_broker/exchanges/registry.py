"""The broker's exchanges: declaring, deleting, binding, and what a deleted queue leaves.

Rules this module owns:

* The four default exchanges (:data:`~proton_broker.exchanges.exchange.DEFAULT_EXCHANGES`)
  always exist, are durable, and cannot be deleted.
* Declaring a name that exists returns the exchange if the type is the same, and is refused
  (``InvalidField`` naming ``exchange-type``) if not; nothing changes.
* Limits, on by default: how many exchanges (``broker.max_exchanges``, the defaults not
  counted) and how many bindings in all (``broker.max_bindings``); past them a declaration or
  binding is refused with ``ResourceLimitExceeded`` and nothing changes. They bound what is
  created, not what the store brings back: the broker recovers with ``limited`` off.
* Every binding is indexed by its queue too, so a deleted queue's bindings go at the cost of
  that queue's bindings, not of every exchange's.
* This module knows no store and no queue objects: the broker persists durable exchanges
  and bindings, and checks that a queue exists before binding it.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from proton_broker.errors import InvalidField, NotFound, PreconditionFailed, ResourceLimitExceeded
from proton_broker.exchanges.exchange import (
    DEFAULT_EXCHANGES,
    Binding,
    Exchange,
    check_declarable,
)


class Exchanges:
    """Every exchange by name, and which exchanges each queue is bound in."""

    def __init__(self, max_exchanges: int = 10000, max_bindings: int = 1000000) -> None:
        self.max_exchanges = max_exchanges
        self.max_bindings = max_bindings
        self._all = {
            name: Exchange(name, kind, durable=True) for name, kind in DEFAULT_EXCHANGES.items()
        }
        self._bound_in: dict[str, set[str]] = {}  # queue -> exchanges with its bindings
        self.binding_count = 0

    def get(self, name: str) -> Exchange | None:
        return self._all.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._all

    def __iter__(self) -> Iterator[Exchange]:
        return iter(list(self._all.values()))

    def __len__(self) -> int:
        return len(self._all)

    def named(self, name: str) -> Exchange:
        """The exchange called ``name`` (NotFound if there is none)."""
        exchange = self._all.get(name)
        if exchange is None:
            raise NotFound(f"Exchange not found: {name}")
        return exchange

    def declare(
        self,
        name: str,
        kind: str,
        durable: bool = False,
        arguments: Mapping[str, Any] | None = None,
        limited: bool = True,
    ) -> tuple[Exchange, bool]:
        """The exchange ``name`` of type ``kind``, and whether it was created now
        (``limited``: within ``broker.max_exchanges``)."""
        existing = self._all.get(name)
        if existing is not None:
            if existing.kind != kind:
                raise InvalidField(
                    f"exchange '{name}' exists with type '{existing.kind}', not '{kind}'",
                    "exchange-type",
                )
            return existing, False
        check_declarable(name, kind)
        if limited and len(self._all) - len(DEFAULT_EXCHANGES) >= self.max_exchanges:
            raise ResourceLimitExceeded(
                f"cannot create exchange '{name}': the broker has {self.max_exchanges} "
                "exchanges, the most it may have (broker.max_exchanges)"
            )
        exchange = Exchange(name, kind, durable, arguments)
        self._all[name] = exchange
        return exchange, True

    def delete(self, name: str) -> Exchange:
        """Remove exchange ``name`` and its bindings (NotFound; PreconditionFailed for a
        default exchange)."""
        exchange = self.named(name)
        if exchange.builtin:
            raise PreconditionFailed(f"'{name}' is one of the broker's own exchanges")
        for binding in exchange.bindings():
            self._forget(binding.queue, name)
        self.binding_count -= exchange.binding_count
        del self._all[name]
        exchange.deleted = True
        return exchange

    def bind(
        self,
        exchange: str,
        queue: str,
        key: str = "",
        arguments: Mapping[str, Any] | None = None,
        limited: bool = True,
    ) -> bool:
        """Bind ``queue`` to ``exchange`` with ``key``; False if that binding existed (its
        arguments replaced). ``limited``: within ``broker.max_bindings``."""
        target = self.named(exchange)
        full = self.binding_count >= self.max_bindings
        if limited and full and not target.is_bound(queue, key):
            raise ResourceLimitExceeded(
                f"cannot bind '{queue}' to '{exchange}': the broker has {self.max_bindings} "
                "bindings, the most it may have (broker.max_bindings)"
            )
        created = target.bind(queue, key, arguments)
        if created:
            self.binding_count += 1
            self._bound_in.setdefault(queue, set()).add(exchange)
        return created

    def unbind(self, exchange: str, queue: str, key: str = "") -> bool:
        """Remove one binding; False if there was none (NotFound if no such exchange)."""
        target = self.named(exchange)
        if not target.unbind(queue, key):
            return False
        self.binding_count -= 1
        if not target.is_bound(queue):
            self._forget(queue, exchange)
        return True

    def queue_deleted(self, queue: str) -> int:
        """Remove every binding of ``queue``; returns how many there were."""
        removed = 0
        for name in self._bound_in.pop(queue, ()):
            removed += self._all[name].unbind_queue(queue)
        self.binding_count -= removed
        return removed

    def bindings_of(self, queue: str) -> list[Binding]:
        """The bindings of ``queue``, in every exchange."""
        return [
            binding
            for name in sorted(self._bound_in.get(queue, ()))
            for binding in self._all[name].bindings_of(queue)
        ]

    def _forget(self, queue: str, exchange: str) -> None:
        names = self._bound_in.get(queue)
        if names is not None:
            names.discard(exchange)
            if not names:
                del self._bound_in[queue]
