"""A blocking client of an AMQP management node (``$management``).

It speaks the AMQP Management 1.0 draft as Qpid Broker-J answers it (see
:mod:`proton_broker.management`): replies come back on a dynamic receiver whose address is
the requests' ``reply-to``, matched by ``correlation-id``. Nothing here is specific to this
broker, so the tool works against any broker with the same node where the operation exists.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from proton import Message, SSLDomain
from proton.utils import BlockingConnection

from proton_broker.management_paths import object_path

MANAGEMENT_ADDRESS = "$management"
NODE_TYPE = "org.amqp.management"
# Entities a QUERY asks for at a time: a queue's every attribute (about 60 values) times
# this stays well under the 65,535 values Proton reads in one message.
PAGE = 500


class Refused(Exception):
    """The broker said no, or could not be asked: exit 1 with this text."""


@dataclass
class Reply:
    status: int
    description: str
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class ManagementClient:
    """One connection, one request link and one reply link; requests one at a time."""

    def __init__(
        self,
        url: str,
        timeout: float | None = 10.0,
        ssl_domain: SSLDomain | None = None,
        allowed_mechs: str | None = None,
    ) -> None:
        """``ssl_domain``: the TLS settings of an ``amqps`` URL (Proton's defaults if
        None); ``allowed_mechs``: the SASL mechanisms to offer, space-separated."""
        self.timeout = timeout
        options: dict[str, Any] = {"ssl_domain": ssl_domain} if ssl_domain is not None else {}
        if allowed_mechs is not None:
            options["allowed_mechs"] = allowed_mechs
        self.connection = BlockingConnection(url, timeout=timeout, **options)
        try:
            self.receiver = self.connection.create_receiver(None, dynamic=True)
            self.reply_to = self.receiver.remote_source.address
            self.sender = self.connection.create_sender(MANAGEMENT_ADDRESS)
        except BaseException:
            self.connection.close()
            raise

    def request(
        self,
        operation: str,
        entity_type: str,
        name: str | None = None,
        body: Any = None,
        **properties: Any,
    ) -> Reply:
        """Send one request and wait for its reply. An entity is named by ``name`` and,
        except on CREATE, also by Broker-J's ``index``=``object-path`` with ``key``:
        Broker-J finds an existing entity only that way (or by its identity)."""
        correlation = str(uuid.uuid4())
        props = {"operation": operation, "type": entity_type, **properties}
        if name is not None:
            props["name"] = name
            if operation != "CREATE" and entity_type != NODE_TYPE:
                props.setdefault("index", "object-path")
                props.setdefault("key", object_path(name))  # a '/' escaped, as Broker-J's
        self.sender.send(
            Message(reply_to=self.reply_to, correlation_id=correlation, properties=props, body=body)
        )
        while True:
            reply = self.receiver.receive(self.timeout)
            self.receiver.accept()
            if reply.correlation_id == correlation:
                props = reply.properties or {}
                body = reply.body
                if isinstance(body, memoryview):  # Proton's view into the reply: copied
                    body = bytes(body)  # before the reply goes
                return Reply(
                    int(props.get("statusCode", 500)), str(props.get("statusDescription", "")), body
                )

    def node(self, operation: str, body: Any = None, **properties: Any) -> Reply:
        """An operation on the management node itself (QUERY, GET-TYPES, ...)."""
        return self.request(operation, NODE_TYPE, "self", body, identity="self", **properties)

    def query(
        self, entity_type: str, attributes: list[str] | None = None, **properties: Any
    ) -> list[dict[str, Any]]:
        """Every entity of ``entity_type`` (QUERY), each as a map of ``attributes`` (all of
        them when None); a refusal raises :class:`Refused`. Asked for in pages of
        :data:`PAGE` (QUERY's ``offset`` and ``count``) unless ``properties`` give a
        ``count``: a client's Proton reads at most 65,535 values in one message, and a
        broker sends no answer larger than its largest message."""
        if "count" in properties:
            return self._query_page(entity_type, attributes, **properties)
        rows: list[dict[str, Any]] = []
        while True:
            page = self._query_page(
                entity_type, attributes, **properties, offset=len(rows), count=PAGE
            )
            rows.extend(page)
            if len(page) < PAGE:
                return rows

    def _query_page(
        self, entity_type: str, attributes: list[str] | None, **properties: Any
    ) -> list[dict[str, Any]]:
        body = {"attributeNames": attributes or []}
        reply = self.node("QUERY", body, entityType=entity_type, **properties)
        if not reply.ok:
            raise Refused(f"{reply.status} {reply.description}")
        body = reply.body if isinstance(reply.body, dict) else {}
        names = list(body.get("attributeNames") or attributes or [])
        return [dict(zip(names, result, strict=False)) for result in body.get("results") or []]

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> ManagementClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def tls_settings(
    certificate: str | None = None, key: str | None = None, trusted: str | None = None
) -> SSLDomain | None:
    """A client's TLS settings (qpid-config's ``--ssl-certificate`` and ``--ssl-key``, and
    a file of CAs to trust instead of the system's); None when none is given."""
    if certificate is None and key is None and trusted is None:
        return None
    domain = SSLDomain(SSLDomain.MODE_CLIENT)
    if trusted is not None:
        domain.set_trusted_ca_db(trusted)
        domain.set_peer_authentication(SSLDomain.VERIFY_PEER_NAME, trusted)
    if certificate is not None:
        domain.set_credentials(certificate, key or certificate, None)
    return domain
