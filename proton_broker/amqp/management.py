"""The ``$management`` node on the wire: request links, reading requests, sending replies.

What a request means is :mod:`proton_broker.management`'s business; this module only moves
messages, the way Qpid Broker-J's ``ManagementNode`` does:

* A client sends requests on a link whose target address is ``$management``. The
  application properties (``operation``, ``type``, ``name``/``identity``, ...) and the body
  (a map) are handed to :class:`~proton_broker.management.Management`.
* The reply goes to the request's ``reply-to`` with ``correlation-id`` set to the request's
  correlation-id, or else its message-id, and the application properties ``statusCode``
  (an int) and ``statusDescription``. The id keeps its type (a binary id comes back
  binary; Broker-J turns every id into a string). A failure's reply (a status of 400 or
  more) also carries the request's application properties, as Broker-J's does, so a client
  sending many requests sees which one failed: those an application property may hold (a
  list a request gives, such as ``messageIds``, is left out). ``reply-to`` may be:

  - the address of a queue, typically a dynamic node the client made with a receiver whose
    source is ``dynamic`` (qpid-proton clients, the Qpid Dispatch tools, our CLI). The
    queue must exist: a reply never creates one (neither qpidd's nor Broker-J's does).
    Unless the requester's connection made it (the attach of a link still attached
    created it: a dynamic reply queue), the ACL must let the requester send to it, as a
    sender on that queue would; a request whose answer it could not otherwise send there
    is not performed (``amqp:unauthorized-access``). Both Qpid brokers route a reply
    without asking their ACL; here a reply carries the request's properties back, and
    would otherwise put a message of the requester's making on any queue;
  - the target address of a receiving link attached to ``$management`` itself on the same
    connection (Broker-J's shape, and its rule: ``getResponseDestination`` matches such a
    link only on the requester's connection): such a link gets a private queue of its own,
    gone when the link goes. Another connection's request naming that address is answered
    as any other address would be.

* A request whose reply could not be delivered anywhere (no ``reply-to``, or one naming no
  node) is not performed: its delivery is settled ``rejected`` with a description, so the
  client learns why instead of waiting. One that cannot be read is rejected the same way.
  Otherwise the request is ``accepted`` once its reply is on the reply queue, whatever the
  status in the reply; if the reply queue refuses the reply (a full reject queue), the
  request, performed by then, is rejected with a description that says so.
* A reply is never larger than ``broker.max_message_size``, the most a client may send
  the broker and so the most it is told to expect: an answer that would be larger (a QUERY
  of tens of thousands of queues) is replaced by one with the status 413 and a description
  saying how large it was and that a QUERY's ``offset`` and ``count`` page through the
  results. The request was performed (a QUERY changes nothing). Broker-J sets no such
  bound; qpidd's QMF splits a query's answer into messages of 100 objects each.
* The reply's body is written by the broker's codec (:func:`~proton_broker.codec.encode.
  encode_tree`), not Proton's ``Data``, which holds at most 65,535 values: a QUERY of
  about a thousand queues.
"""

from __future__ import annotations

import logging
import uuid
from typing import TYPE_CHECKING, Any

from proton import Array, Data, Delivery, Described, Link, Message, byte, int32, symbol

from proton_broker.amqp.conditions import reject
from proton_broker.amqp.control import ControlLink
from proton_broker.codec.encode import encode_tree, encode_value
from proton_broker.codec.sections import parse_message
from proton_broker.errors import BrokerError, InvalidField, NotFound
from proton_broker.management import NODE_ADDRESS, Management, Response
from proton_broker.queues.queue import Queue

if TYPE_CHECKING:
    from proton_broker.broker import Broker

log = logging.getLogger("proton_broker.amqp")

MANAGEMENT_ADDRESS = NODE_ADDRESS


class ManagementNode:
    """The node: performs requests and routes replies (one per server)."""

    def __init__(self, broker: Broker, management: Management) -> None:
        self.broker = broker
        self.management = management  # what performs the requests
        # By (connection, the receiving link's target address); an entry goes with its queue.
        self._reply_queues: dict[tuple[Any, str], Queue] = {}
        self._keys: dict[str, tuple[Any, str]] = {}  # queue name -> its key above
        broker.deletion_watchers.append(self._queue_deleted)

    def _queue_deleted(self, queue: Queue) -> None:
        key = self._keys.pop(queue.name, None)
        if key is not None:
            self._reply_queues.pop(key, None)

    def reply_queue_for(self, connection: Any, address: str | None) -> Queue:
        """A private queue for a receiver attached to ``$management`` on ``connection``
        whose target address is ``address`` (Broker-J's reply routing); the server deletes
        it with the link."""
        if not address:
            raise InvalidField(
                "a receiver from $management needs a target address: the "
                "reply-to its requests will use",
                "target",
            )
        if (connection, address) in self._reply_queues:
            raise InvalidField(
                f"another link receives management replies for '{address}'", "target"
            )
        queue = self.broker.declare(f"TempQueue{uuid.uuid4()}")
        self._reply_queues[connection, address] = queue
        self._keys[queue.name] = (connection, address)
        return queue

    def _reply_target(self, reply_to: Any, connection: Any, user: str | None) -> Queue:
        """The queue the reply goes to (see the module rules): never made for it, and
        one the requester neither made nor may send to is refused."""
        if not isinstance(reply_to, str) or not reply_to:
            raise InvalidField(
                "a management request needs a reply-to address for its "
                "answer; the request was not performed",
                "reply-to",
            )
        queue = self._reply_queues.get((connection, reply_to))
        if queue is not None:
            return queue
        try:
            queue = self.broker.resolve(reply_to, create=False)
        except NotFound:
            raise NotFound(
                f"reply-to '{reply_to}' names no queue; the request was not performed"
            ) from None
        if user is not None and not self.broker.lifetimes.made_by(queue, connection):
            self.broker.access.send(user, queue.name, queue.settings)
        return queue

    def request(
        self,
        data: bytes,
        user: str | None = None,
        connection: Any = None,
        confidential: bool = False,
    ) -> None:
        """Perform one encoded request (sent on ``connection``, over which confidential
        operations may be asked for or not) and queue its reply; raises
        :class:`BrokerError` (the request is then rejected) when there is nowhere to
        answer."""
        request = Message()
        try:
            request.decode(data)
        except Exception as exc:  # whatever Proton finds wrong with it
            raise InvalidField(f"unreadable management request: {exc}") from None
        target = self._reply_target(request.reply_to, connection, user)
        properties = {str(k): v for k, v in (request.properties or {}).items()}
        response = self.management.handle(properties, request.body, user, confidential)
        correlation = request.correlation_id if request.correlation_id is not None else request.id
        if isinstance(correlation, memoryview):  # a binary id, as Proton decodes one
            correlation = bytes(correlation)  # (its setter would drop the view)
        if not response.pending:
            self._answer(response, target, request.reply_to, correlation, properties)
            return

        def answer_later() -> None:  # the request was accepted: a failure now is only logged
            try:
                self._answer(response, target, request.reply_to, correlation, properties)
            except BrokerError as exc:
                log.warning("management reply lost: %s", exc.description)

        response.when_done(answer_later)

    def _answer(
        self,
        response: Response,
        target: Queue,
        reply_to: str,
        correlation: Any,
        properties: dict[str, Any],
    ) -> None:
        """Queue the reply on ``target`` (written, not waited for, when the queue keeps
        every message: its messageDurability); BrokerError when it cannot be."""
        try:
            echoed = _echoable(properties) if response.status >= FAILURE else {}
            reply = _reply(response, reply_to, correlation, echoed)
            most = self.broker.config.broker.max_message_size
            if len(reply) > most:  # too large to send: says so instead (module rules)
                response = _too_large(response, len(reply), most)
                reply = _reply(response, reply_to, correlation, _echoable(properties))
            self.broker.publish(parse_message(reply), target, _reply_written)
        except BrokerError as exc:  # e.g. a full reject-policy reply queue
            exc.description = (
                f"the request was performed ({response.status} "
                f"{response.description}) but its reply could not be queued "
                f"on '{target.name}': {exc.description}"
            )
            exc.args = (exc.description,)
            raise
        log.debug(
            "management %s %s: %d %s",
            properties.get("operation"),
            properties.get("name") or properties.get("identity"),
            response.status,
            response.description,
        )


FAILURE = 400  # the first status whose reply carries the request's properties too
TOO_LARGE = 413  # HTTP's "content too large": an answer over broker.max_message_size


def _too_large(response: Response, size: int, most: int) -> Response:
    """The answer sent in place of ``response``, whose reply of ``size`` bytes is over
    ``most`` (broker.max_message_size): what was done, and how to ask for less."""
    return Response(
        TOO_LARGE,
        f"the answer ({response.status} {response.description}) is {size} bytes, more "
        f"than broker.max_message_size ({most}); a QUERY can ask for fewer results at "
        "a time with the application properties 'offset' and 'count'",
    )


def _reply_written(error: BaseException | None) -> None:
    """A reply its queue keeps is on disk, or (logged) could not be written: it is then
    taken back, as a producer's refused message is."""
    if error is not None:
        log.warning("management reply not stored: %s", error)


def _echoable(properties: dict[str, Any]) -> dict[str, Any]:
    """The request's properties a failure answer carries back: those an application
    property may hold (AMQP 1.0 3.2.5: no list, map, array or described value; a request
    may give ``statistics`` or ``messageIds`` as a list)."""
    return {
        key: value
        for key, value in properties.items()
        if not isinstance(value, (list, tuple, dict, Array, Described))
    }


# Qpid JMS's message types (x-opt-jms-msg-type), as Broker-J marks its answers so that a
# JMS client reads a map as a MapMessage, a list as a StreamMessage, bytes as BytesMessage.
JMS_MSG_TYPE = symbol("x-opt-jms-msg-type")
_JMS_MAP, _JMS_BYTES, _JMS_STREAM = byte(2), byte(3), byte(4)


def _jms_type(body: Any) -> byte | None:
    if isinstance(body, dict):
        return _JMS_MAP
    if isinstance(body, (bytes, bytearray, memoryview)):
        return _JMS_BYTES
    if isinstance(body, list):
        return _JMS_STREAM
    return None


def _reply(response: Response, address: str, correlation: Any, echoed: dict[str, Any]) -> bytes:
    """The reply's bytes: Proton writes its small sections, the broker's codec the body,
    which may hold more values than Proton's ``Data`` can (see the module rules)."""
    body = response.body
    if body is None and response.status >= FAILURE:
        body = b""  # Broker-J's failure answer: an empty bytes message
    kind = _jms_type(body)
    reply = Message(
        address=address,
        correlation_id=correlation,
        annotations=None if kind is None else {JMS_MSG_TYPE: kind},
        content_type="application/octet-stream" if kind is _JMS_BYTES else None,
        properties={
            **echoed,
            **response.properties,
            "statusCode": int32(response.status),
            "statusDescription": response.description,
        },
    )
    reply.id = str(uuid.uuid4())
    head = bytes(reply.encode())
    if body is None:
        return head
    if isinstance(body, bytes):  # a data section (Broker-J's)
        return head + DATA_SECTION + encode_value(body)
    return head + VALUE_SECTION + encode_tree(body, _proton_value)


DATA_SECTION, VALUE_SECTION = b"\x00\x53\x75", b"\x00\x53\x77"  # data, amqp-value


def _proton_value(value: Any) -> bytes:
    """One value of a type only Proton knows (a symbol, a ulong, a described value from
    a request...), encoded by Proton: one value, well within what its ``Data`` holds."""
    data = Data()
    data.put_object(value)
    return bytes(data.encode())


class RequestLink(ControlLink):
    """A link on which a client sends management requests (target ``$management``).

    While the broker's memory budget is full its credit is withdrawn, as every producer's
    is (Server._memory_full): a reply is a message on a queue, and a client asking for
    replies nobody reads would otherwise grow the broker without bound. Requests in flight
    then are performed and answered; credit comes back when the budget has room."""

    def __init__(
        self,
        link: Link,
        node: ManagementNode,
        credit: int,
        user: str,
        max_size: int,
        confidential: bool = False,
    ) -> None:
        super().__init__(link, credit, max_size)
        self.node = node
        self.user = user  # who sends the requests: the ACL decides what each may do
        self.confidential = confidential  # over TLS, or from where plain is allowed for them
        self.queue: Queue | None = None  # no queue behind it (see Server._queue_deleted)
        self._budget = node.broker.loop_hooks.budget

    def may_grant(self) -> bool:
        return not self._budget.full

    def withheld_because(self) -> str:
        return self._budget.why_full()

    def memory_full(self, full: bool) -> None:
        """The broker's memory budget filled (credit withdrawn) or has room again."""
        if full:
            self.withdraw()
        else:
            self.restore()

    def handle(self, delivery: Delivery, data: bytes) -> None:
        try:
            self.node.request(data, self.user, self.link.connection._impl, self.confidential)
        except BrokerError as exc:
            log.info("management request refused: %s", exc.description)
            if not delivery.settled:
                reject(delivery, exc)
            else:
                delivery.settle()
        else:
            if not delivery.settled:
                delivery.update(Delivery.ACCEPTED)
            delivery.settle()
