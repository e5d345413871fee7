"""Wire fuzzing: a broker fed damaged AMQP byte streams keeps serving, keeps its durable
messages, and closes every connection it ends at the socket.

The streams are real client bytes: Proton's engine driven in memory against an in-memory
Proton peer (send to a queue, receive with credit, browse, the anonymous relay, a message
split over several frames, with and without SASL), and what ``tests/engine_client.py``
sends to a real broker. A seeded mutator damages them (byte flips, type codes, insertions,
deletions, truncations, dropped, swapped and duplicated frames, wrong frame sizes and data
offsets, frames spliced from another connection, a second protocol header) and each
damaged stream goes to a broker subprocess over its own TCP connection, which the client
then ends in one of four ways (close after reading, half-close, reset, close at once).

After every case the broker is alive; after every batch a normal client sends and
receives, a durable queue filled beforehand browses complete and in order, and the
broker's open file descriptors are back to their baseline.

Every case is made from ``(seed, index)`` alone (:func:`make_case`), so a failure names
what to replay; ``FUZZ_SEED`` picks another seed.
"""

from __future__ import annotations

import contextlib
import os
import random
import socket
import struct
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from proton import (
    Collector,
    Connection,
    Disposition,
    Event,
    Message,
    Session,
    Terminus,
    Timeout,
    Transport,
)
from proton.reactor import Copy, DynamicNodeProperties
from proton.utils import BlockingConnection

from proton_broker.testing import BrokerProcess
from tests.engine_client import EngineClient

SEED = int(os.environ.get("FUZZ_SEED", "20250611"))
LEDGER = "fuzz-ledger"  # the durable queue no damaged stream may touch
LEDGER_SIZE = 200
FD_SLACK = 0  # descriptors the broker may hold beyond its baseline after a batch
FD_SETTLE = 5.0  # seconds the broker has to close the sockets of a batch
READ_WINDOW = 0.05  # seconds a case listens for the broker's answer


# ---- recorded client streams ----------------------------------------------------------------


class _InMemoryPeer:
    """A Proton client engine wired to a Proton server engine without a socket; every
    byte the client writes is kept. The server opens what the client opens, grants credit
    to senders, sends one message to each receiver that gives credit, and settles."""

    def __init__(self, sasl: bool, peer_max_frame: int | None) -> None:
        self.client, self.server = Connection(), Connection()
        self.client.container = "fuzz-client"
        self.ct, self.st = Transport(), Transport(Transport.SERVER)
        if peer_max_frame:
            self.st.max_frame_size = peer_max_frame
        if sasl:
            self.ct.sasl().allowed_mechs("ANONYMOUS")
            self.st.sasl().allowed_mechs("ANONYMOUS")
        self.cc, self.sc = Collector(), Collector()
        self.client.collect(self.cc)
        self.server.collect(self.sc)
        self.ct.bind(self.client)
        self.st.bind(self.server)
        self.written = bytearray()
        self.received: list[object] = []

    def pump(self) -> None:
        for _ in range(1000):
            moved = False
            for source, sink in ((self.ct, self.st), (self.st, self.ct)):
                pending = source.pending()
                if pending > 0 and sink.capacity() > 0:
                    data = source.peek(min(pending, sink.capacity()))
                    source.pop(len(data))
                    if source is self.ct:
                        self.written += data
                    sink.push(data)
                    moved = True
            self._serve()
            self._client_events()
            if not moved:
                return
        raise AssertionError("the in-memory peers never went quiet")

    def _serve(self) -> None:
        while (event := self.sc.peek()) is not None:
            kind = event.type
            if kind == Event.CONNECTION_REMOTE_OPEN:
                event.connection.open()
            elif kind == Event.SESSION_REMOTE_OPEN:
                event.session.open()
            elif kind == Event.LINK_REMOTE_OPEN:
                link = event.link
                link.source.copy(link.remote_source)
                link.target.copy(link.remote_target)
                link.open()
                if link.is_receiver:
                    link.flow(10)
            elif kind == Event.LINK_FLOW:
                link = event.link
                if link.is_sender and link.credit > 0 and not link.unsettled:
                    link.delivery(b"server-1")
                    link.send(Message(body="from the peer").encode())
                    link.advance()
            elif kind == Event.DELIVERY:
                delivery = event.delivery
                if delivery.link.is_receiver and delivery.readable and not delivery.partial:
                    delivery.link.recv(delivery.pending)
                    delivery.link.advance()
                    delivery.update(Disposition.ACCEPTED)
                    delivery.settle()
            elif kind in (Event.LINK_REMOTE_CLOSE, Event.LINK_REMOTE_DETACH):
                event.link.close()
            elif kind == Event.SESSION_REMOTE_CLOSE:
                event.session.close()
            elif kind == Event.CONNECTION_REMOTE_CLOSE:
                event.connection.close()
            self.sc.pop()

    def _client_events(self) -> None:
        while (event := self.cc.peek()) is not None:
            delivery = event.delivery if event.type == Event.DELIVERY else None
            if (
                delivery is not None
                and delivery.link.is_receiver
                and delivery.readable
                and not delivery.partial
            ):
                message = Message()
                message.decode(delivery.link.recv(delivery.pending))
                delivery.link.advance()
                self.received.append(message.body)
                delivery.update(Disposition.ACCEPTED)
                delivery.settle()
            self.cc.pop()


def _record(
    scenario: Callable[[Session, _InMemoryPeer], None],
    sasl: bool = True,
    peer_max_frame: int | None = None,
) -> bytes:
    peer = _InMemoryPeer(sasl, peer_max_frame)
    peer.client.open()
    session = peer.client.session()
    session.open()
    scenario(session, peer)
    session.close()
    peer.client.close()
    peer.pump()
    return bytes(peer.written)


def _send_to_a_queue(session: Session, peer: _InMemoryPeer, body: object = "hello") -> None:
    sender = session.sender("fuzz-send")
    sender.target.address = sender.source.address = "fuzz-send"
    sender.open()
    peer.pump()
    delivery = sender.delivery(b"1")
    sender.send(Message(body=body, durable=True, properties={"k": 1}).encode())
    sender.advance()
    peer.pump()
    delivery.settle()
    sender.close()
    peer.pump()


def _receive_with_credit(session: Session, peer: _InMemoryPeer, browse: bool = False) -> None:
    name = "fuzz-browse" if browse else "fuzz-recv"
    receiver = session.receiver(name)
    receiver.source.address = receiver.target.address = name
    if browse:
        receiver.source.distribution_mode = Terminus.DIST_MODE_COPY
    receiver.open()
    receiver.flow(10)
    peer.pump()
    if browse:
        receiver.detach()
    else:
        receiver.close()
    peer.pump()


def _anonymous_relay(session: Session, peer: _InMemoryPeer) -> None:
    sender = session.sender("fuzz-relay")
    sender.target.address = None
    sender.open()
    peer.pump()
    for n, address in enumerate(("fuzz-relay-a", "fuzz-relay-b")):
        delivery = sender.delivery(str(n).encode())
        sender.send(Message(address=address, body=n).encode())
        sender.advance()
        peer.pump()
        delivery.settle()
    sender.close()
    peer.pump()


class _Tap:
    """A socket that keeps what was sent through it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sent = bytearray()

    def send(self, data: bytes) -> int:
        n = self.sock.send(data)
        self.sent += bytes(data[:n])
        return n

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def close(self) -> None:
        self.sock.close()


def _engine_client_stream(broker: BrokerProcess) -> bytes:
    """What tests/engine_client.py sends for a produce, consume and settle round."""
    client = EngineClient(broker.host, broker.port, sasl=True)
    tap = _Tap(client.sock)
    client.sock = tap  # type: ignore[assignment]
    sender = client.sender("fuzz-engine", node_properties={"x-qpid-priorities": 3})
    client.wait_settled(client.send(sender, Message(body="engine", priority=2), pump=False))
    receiver = client.receiver("fuzz-engine", credit=5)
    (got,) = client.wait_received(receiver, 1)
    client.settle(got)
    client.close()
    return bytes(tap.sent)


def record_streams(broker: BrokerProcess) -> dict[str, bytes]:
    return {
        "send": _record(_send_to_a_queue),
        "send-no-sasl": _record(_send_to_a_queue, sasl=False),
        "send-multi-frame": _record(
            lambda s, p: _send_to_a_queue(s, p, body="x" * 3000), peer_max_frame=512
        ),
        "receive": _record(_receive_with_credit),
        "browse": _record(lambda s, p: _receive_with_credit(s, p, browse=True)),
        "anonymous-relay": _record(_anonymous_relay),
        "engine-client": _engine_client_stream(broker),
    }


# ---- the mutator --------------------------------------------------------------------------


def segments(data: bytes | bytearray) -> list[tuple[int, int]]:
    """(start, end) of the protocol headers and frames of a stream, as far as it parses."""
    found, pos = [], 0
    while pos + 8 <= len(data):
        if data[pos : pos + 4] == b"AMQP":
            size = 8
        else:
            size = int.from_bytes(data[pos : pos + 4], "big")
            if size < 8 or pos + size > len(data):
                break
        found.append((pos, pos + size))
        pos += size
    return found


INTERESTING_BYTES = (0x00, 0x40, 0x41, 0x45, 0x53, 0x70, 0x80, 0xA0, 0xA1, 0xA3, 0xB1, 0xC0)
INTERESTING_BYTES += (0xC1, 0xD0, 0xD1, 0xE0, 0xF0, 0xFF)


def _frames(data: bytearray) -> list[tuple[int, int]]:
    """The frames (not protocol headers) of ``data``; empty if none parse."""
    return [(a, b) for a, b in segments(data) if data[a : a + 4] != b"AMQP"]


def _flip(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    pos, mask = rng.randrange(len(data)), 1 << rng.randrange(8)
    data[pos] ^= mask
    return f"flip bit {mask:#04x} of byte {pos}"


def _set_byte(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    pos, value = rng.randrange(len(data)), rng.choice(INTERESTING_BYTES)
    data[pos] = value
    return f"set byte {pos} to {value:#04x}"


def _insert(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    pos, chunk = rng.randrange(len(data) + 1), rng.randbytes(rng.randint(1, 16))
    data[pos:pos] = chunk
    return f"insert {chunk.hex()} at {pos}"


def _delete(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    pos = rng.randrange(len(data))
    n = rng.randint(1, 32)
    del data[pos : pos + n]
    return f"delete {n} bytes at {pos}"


def _truncate(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    pos = rng.randrange(len(data))
    del data[pos:]
    return f"truncate at {pos}"


def _duplicate_frame(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    frames = _frames(data)
    if not frames:
        return _flip(rng, data, streams)
    k = rng.randrange(len(frames))
    start, end = frames[k]
    times = rng.choice((1, 1, 2, 50))
    data[end:end] = bytes(data[start:end]) * times
    return f"repeat frame {k} ({start}:{end}) {times} more time(s)"


def _drop_frame(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    frames = _frames(data)
    if not frames:
        return _delete(rng, data, streams)
    k = rng.randrange(len(frames))
    start, end = frames[k]
    del data[start:end]
    return f"drop frame {k} ({start}:{end})"


def _swap_frames(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    frames = _frames(data)
    if len(frames) < 2:
        return _insert(rng, data, streams)
    k = rng.randrange(len(frames) - 1)
    (a, b), (c, d) = frames[k], frames[k + 1]
    if b != c:
        return _insert(rng, data, streams)
    data[a:d] = data[c:d] + data[a:b]
    return f"swap frames {k} and {k + 1}"


def _frame_size(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    frames = _frames(data)
    if not frames:
        return _set_byte(rng, data, streams)
    k = rng.randrange(len(frames))
    start, end = frames[k]
    size = end - start
    new = rng.choice(
        (0, 1, 7, 8, size - 1, size + 1, size * 2, 0x7FFFFFFF, 0xFFFFFFFF, rng.getrandbits(32))
    )
    data[start : start + 4] = struct.pack(">I", new)
    return f"frame {k} size {size} -> {new}"


def _frame_header(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    frames = _frames(data)
    if not frames:
        return _set_byte(rng, data, streams)
    k = rng.randrange(len(frames))
    start, _ = frames[k]
    offset = rng.choice((4, 5, 6, 7))  # doff, type, channel (two bytes)
    value = rng.choice((0, 1, 2, 3, 0x7F, 0xFF, rng.randrange(256)))
    data[start + offset] = value
    field_name = {4: "doff", 5: "type", 6: "channel hi", 7: "channel lo"}[offset]
    return f"frame {k} {field_name} -> {value:#04x}"


def _splice(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    name = rng.choice(sorted(streams))
    other = streams[name]
    theirs = _frames(bytearray(other))
    ours = segments(data)
    cut = rng.choice(ours)[1] if ours else rng.randrange(len(data) + 1)
    if not theirs:
        return _insert(rng, data, streams)
    first = rng.randrange(len(theirs))
    last = rng.randrange(first, len(theirs))
    chunk = other[theirs[first][0] : theirs[last][1]]
    data[cut:cut] = chunk
    return f"splice frames {first}..{last} of '{name}' at {cut}"


def _header_again(rng: random.Random, data: bytearray, streams: dict[str, bytes]) -> str:
    ours = segments(data)
    cut = rng.choice(ours)[1] if ours else 0
    header = rng.choice((b"AMQP\x00\x01\x00\x00", b"AMQP\x03\x01\x00\x00", b"AMQP\x02\x01\x00\x00"))
    data[cut:cut] = header
    return f"protocol header {header[4:].hex()} again at {cut}"


MUTATORS = (
    (_flip, 6),
    (_set_byte, 5),
    (_insert, 3),
    (_delete, 3),
    (_truncate, 3),
    (_duplicate_frame, 3),
    (_drop_frame, 2),
    (_swap_frames, 2),
    (_frame_size, 4),
    (_frame_header, 3),
    (_splice, 2),
    (_header_again, 1),
)
ENDINGS = ("close", "half-close", "reset", "close-at-once")


@dataclass
class Case:
    seed: int
    index: int
    stream: str
    steps: list[str]
    ending: str
    data: bytes
    client_port: int = 0
    answer: int = 0  # bytes the broker sent back
    broker_closed: bool = False
    broker_inode: str = ""  # the broker's socket for this connection, when it was seen

    def __str__(self) -> str:
        steps = "; ".join(self.steps)
        return (
            f"case {self.index} of seed {self.seed}: stream '{self.stream}', {steps}; "
            f"ending '{self.ending}' ({len(self.data)} bytes sent, {self.answer} answered"
            f"{', the broker closed first' if self.broker_closed else ''})"
        )


def make_case(seed: int, index: int, streams: dict[str, bytes]) -> Case:
    """The ``index``-th damaged stream of ``seed``: the same bytes every time."""
    rng = random.Random(f"{seed}:{index}")
    name = rng.choice(sorted(streams))
    data = bytearray(streams[name])
    steps = []
    functions, weights = zip(*MUTATORS, strict=True)
    for _ in range(rng.choice((1, 1, 1, 2, 2, 3))):
        if not data:
            break
        mutate = rng.choices(functions, weights)[0]
        steps.append(mutate(rng, data, streams))
    return Case(seed, index, name, steps, rng.choice(ENDINGS), bytes(data))


# ---- sending a case -----------------------------------------------------------------------


def deliver(case: Case, broker: BrokerProcess) -> None:
    """Send the case's bytes on a new connection, listen briefly, end as the case says."""
    before = socket_inodes(broker.pid)
    sock = socket.create_connection((broker.host, broker.port), timeout=2)
    case.client_port = sock.getsockname()[1]
    try:
        with contextlib.suppress(OSError):  # the broker may close (or reset) mid-stream
            sock.sendall(case.data)
        if case.ending == "close-at-once":
            case.broker_inode = _accepted_socket(broker.pid, before, wait=0.01)
            return
        if case.ending == "half-close":
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_WR)
        _listen(sock, case)
        case.broker_inode = _accepted_socket(broker.pid, before, wait=0)
        if case.ending == "reset":
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sock.close()


def _accepted_socket(pid: int, before: set[str], wait: float) -> str:
    """The inode of the socket the broker accepted for this connection (the one socket it
    holds now and did not before): it names the case if that socket is never closed,
    even after a reset has taken the connection out of the TCP table."""
    end = time.monotonic() + wait
    while not (new := socket_inodes(pid) - before) and time.monotonic() < end:
        time.sleep(0.0005)
    return min(new) if len(new) == 1 else ""


def _listen(sock: socket.socket, case: Case) -> None:
    end = time.monotonic() + READ_WINDOW
    while (left := end - time.monotonic()) > 0:
        sock.settimeout(left)
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            return
        except OSError:
            case.broker_closed = True
            return
        if not chunk:
            case.broker_closed = True
            return
        case.answer += len(chunk)


# ---- what the broker holds ----------------------------------------------------------------

TCP_STATES = {
    "01": "ESTABLISHED",
    "04": "FIN_WAIT1",
    "05": "FIN_WAIT2",
    "07": "CLOSE",
    "08": "CLOSE_WAIT",
    "09": "LAST_ACK",
    "0B": "CLOSING",
}


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def socket_inodes(pid: int) -> set[str]:
    """The inodes of the sockets a process holds open."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("socket:["):
                inodes.add(link[8:-1])
    return inodes


def tcp_connections(port: int) -> dict[str, tuple[int, str]]:
    """The accepted TCP connections on local ``port``: socket inode -> (the client's port,
    the TCP state of this side; CLOSE_WAIT: the client hung up, this side has not closed)."""
    found = {}
    with open("/proc/net/tcp") as table:
        next(table)
        for line in table:
            cols = line.split()
            if int(cols[1].split(":")[1], 16) == port and cols[3] != "0A" and cols[9] != "0":
                found[cols[9]] = (int(cols[2].split(":")[1], 16), TCP_STATES.get(cols[3], cols[3]))
    return found


@dataclass
class FuzzRun:
    broker: BrokerProcess
    streams: dict[str, bytes] = field(repr=False)
    seed: int
    baseline: int = 0
    baseline_sockets: set[str] = field(default_factory=set, repr=False)
    cases: list[Case] = field(default_factory=list, repr=False)  # this batch's

    def case_failed(self, case: Case, what: str) -> str:
        return (
            f"{what} after {case}\nreplay: make_case({self.seed}, {case.index}, streams)"
            f"\nbroker output (tail):\n{''.join(self.broker.output[-30:])}"
        )

    def run_batch(self, indexes: range) -> None:
        self.cases = []
        for index in indexes:
            case = make_case(self.seed, index, self.streams)
            deliver(case, self.broker)
            self.cases.append(case)
            assert self.broker.alive(), self.case_failed(case, "the broker died")

    def held_sockets(self) -> str:
        """The sockets the broker still holds beyond its baseline, each with its TCP state
        and the case that made it."""
        held = socket_inodes(self.broker.pid) - self.baseline_sockets
        tcp = tcp_connections(self.broker.port)
        by_inode = {case.broker_inode: case for case in self.cases if case.broker_inode}
        by_port = {case.client_port: case for case in self.cases}
        lines = []
        for inode in sorted(held):
            client_port, state = tcp.get(inode, (0, "no TCP state left (the connection was reset)"))
            case = by_inode.get(inode) or by_port.get(client_port)
            lines.append(f"  {state}: {case or 'a connection of no case of this batch'}")
        return "\n".join(lines) or "  (no socket: some other descriptor)"

    def fds_settle(self) -> int:
        deadline = time.monotonic() + FD_SETTLE
        while True:
            count = open_fds(self.broker.pid)
            if count <= self.baseline + FD_SLACK or time.monotonic() > deadline:
                return count
            time.sleep(0.05)


# ---- the invariants -------------------------------------------------------------------------


def fill_ledger(url: str) -> None:
    conn = BlockingConnection(url, timeout=30)
    try:
        sender = conn.create_sender(LEDGER, options=DynamicNodeProperties({"durable": True}))
        for i in range(LEDGER_SIZE):
            sender.send(Message(body=i, durable=True))
    finally:
        conn.close()


def a_normal_client_round_trips(url: str, n: int) -> None:
    conn = BlockingConnection(url, timeout=10)
    try:
        conn.create_sender("fuzz-canary").send(Message(body=f"canary {n}"))
        receiver = conn.create_receiver("fuzz-canary", credit=1)
        assert receiver.receive(timeout=10).body == f"canary {n}"
        receiver.accept()
    finally:
        conn.close()


def ledger_bodies(url: str) -> list[object]:
    """Browse the durable queue: every body, in order (a copy receiver removes nothing)."""
    conn = BlockingConnection(url, timeout=10)
    try:
        receiver = conn.create_receiver(LEDGER, credit=LEDGER_SIZE + 10, options=Copy())
        bodies = [receiver.receive(timeout=10).body for _ in range(LEDGER_SIZE)]
        with contextlib.suppress(Timeout):
            bodies.append(receiver.receive(timeout=0.2).body)  # one too many: a duplicate
        return bodies
    finally:
        conn.close()


def check_the_broker(run: FuzzRun, batch: int) -> None:
    """The four promises, after a batch: alive, serving, the durable queue whole, and
    every socket of the batch closed."""
    first, last = run.cases[0].index, run.cases[-1].index
    where = f"batch {batch} (cases {first}..{last}) of seed {run.seed}"
    replay = "replay a case: make_case(seed, index, record_streams(broker))"
    assert run.broker.alive(), f"the broker died in {where}; {replay}"
    try:
        a_normal_client_round_trips(run.broker.url, batch)
        bodies = ledger_bodies(run.broker.url)
    except Exception as exc:  # a Timeout or a refused connection: say after what
        pytest.fail(f"a normal client failed after {where}: {exc!r}; {replay}")
    assert bodies == list(range(LEDGER_SIZE)), (
        f"the durable queue is not 0..{LEDGER_SIZE - 1} after {where}: {bodies}; {replay}"
    )
    fds, limit = run.fds_settle(), run.baseline + FD_SLACK
    assert fds <= limit, (
        f"the broker holds {fds} file descriptors {FD_SETTLE:g} s after {where}, "
        f"{run.baseline} before fuzzing (slack {FD_SLACK}); the sockets it has not "
        f"closed:\n{run.held_sockets()}\n{replay}"
    )


# ---- the tests ------------------------------------------------------------------------------

BATCH = 100  # cases between two checks of the broker
Target = tuple[BrokerProcess, dict[str, bytes]]


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    """A broker subprocess with its durable queue filled, and the client streams to damage."""
    with BrokerProcess("--store", "sqlite") as broker:
        fill_ledger(broker.url)
        yield broker, record_streams(broker)


def fuzz(target: Target, count: int, budget: float) -> int:
    """Send up to ``count`` damaged streams, in batches, for at most about ``budget``
    seconds, checking the broker after each batch; returns the number of cases sent."""
    broker, streams = target
    run = FuzzRun(broker, streams, SEED)
    a_normal_client_round_trips(broker.url, -1)
    assert ledger_bodies(broker.url) == list(range(LEDGER_SIZE))
    time.sleep(0.2)
    run.baseline, run.baseline_sockets = open_fds(broker.pid), socket_inodes(broker.pid)
    print(f"seed {SEED}: up to {count} cases in {budget:g} s; the broker holds {run.baseline} fds")
    end, sent, batch = time.monotonic() + budget, 0, 0
    while sent < count and time.monotonic() < end:
        size = min(BATCH, count - sent)
        run.run_batch(range(sent, sent + size))
        sent += size
        check_the_broker(run, batch)
        batch += 1
    print(f"seed {SEED}: {sent} cases in {batch} batches, the broker unharmed")
    return sent


def test_the_recorded_streams_are_whole_client_conversations(target: Target) -> None:
    _, streams = target
    for name, stream in streams.items():
        parsed = segments(stream)
        assert parsed[-1][1] == len(stream), name  # headers and frames, nothing left over
        headers = [stream[a:b] for a, b in parsed if stream[a : a + 4] == b"AMQP"]
        assert headers[-1] == b"AMQP\x00\x01\x00\x00", name
        assert len(parsed) - len(headers) >= 6, name  # open, begin, attach, ..., close


def test_a_case_is_the_same_bytes_every_time_for_its_seed_and_index(target: Target) -> None:
    _, streams = target
    first = [make_case(SEED, i, streams) for i in range(50)]
    again = [make_case(SEED, i, streams) for i in range(50)]
    assert [(c.data, c.steps, c.ending) for c in first] == [
        (c.data, c.steps, c.ending) for c in again
    ]
    assert len({c.data for c in first}) > 45  # and the cases differ from each other


def test_damaged_streams_leave_the_broker_serving_its_queues_and_closing_its_sockets(
    target: Target,
) -> None:
    assert fuzz(target, count=5000, budget=30.0) >= 300


@pytest.mark.soak
@pytest.mark.timeout(1200)
def test_ten_times_as_many_damaged_streams_leave_the_broker_serving(target: Target) -> None:
    assert fuzz(target, count=50000, budget=450.0) >= 5000
