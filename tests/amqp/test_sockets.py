"""Sockets the broker is done with are closed: a client that sends a broken stream and
goes, or goes in any state, leaves no half-closed socket (CLOSE_WAIT) and no file
descriptor behind, and the broker keeps serving. Streams are a real client's bytes
(Proton's engine, driven in memory) with seeded mutations."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import time

from proton import Connection, Message, Transport
from proton.utils import BlockingConnection

from proton_broker.testing import BrokerProcess


def a_client_stream() -> bytes:
    """What a client sends to open, begin and attach a sender: Proton's own bytes."""
    conn = Connection()
    conn.container = "mutant"
    transport = Transport()
    transport.bind(conn)
    conn.open()
    session = conn.session()
    session.open()
    link = session.sender("mutant-link")
    link.target.address = "mutant-queue"
    link.open()
    return bytes(transport.peek(transport.pending()))


def mutated(stream: bytes, rnd: random.Random) -> bytes:
    data = bytearray(stream)
    for _ in range(rnd.randint(1, 4)):
        data[rnd.randrange(8, len(data))] = rnd.randrange(256)  # past the protocol header
    return bytes(data[: rnd.randint(8, len(data))])  # and perhaps cut short


def open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def half_closed(port: int) -> int:
    """Sockets of the broker's port in CLOSE_WAIT (the peer went, we did not close)."""
    count = 0
    with open("/proc/net/tcp") as table:
        lines = table.read().splitlines()[1:]
    for line in lines:
        fields = line.split()
        if fields[1].endswith(f":{port:04X}") and fields[3] == "08":
            count += 1
    return count


def test_clients_that_send_broken_streams_and_go_leave_no_socket_behind() -> None:
    stream, rnd = a_client_stream(), random.Random(19)
    with BrokerProcess("--store", "memory") as broker:
        time.sleep(0.3)
        baseline = open_fds(broker.pid)
        for _ in range(120):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.sendall(mutated(stream, rnd))
            sock.settimeout(0.02)
            with contextlib.suppress(OSError):
                sock.recv(65536)
            sock.close()  # in whatever state the broker is in with it
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and open_fds(broker.pid) > baseline:
            time.sleep(0.1)
        assert half_closed(broker.port) == 0
        assert open_fds(broker.pid) <= baseline
        conn = BlockingConnection(broker.url)  # and it serves an honest client
        conn.create_sender("after").send(Message(body="fine"))
        assert conn.create_receiver("after").receive(timeout=5).body == "fine"
        conn.close()


def test_a_refused_stream_is_ended_in_order_so_the_client_reads_the_answer_sent_before() -> None:
    # A client that is not speaking AMQP, and sends more than the broker reads before it
    # gives up: the broker answers with its protocol header and closes. Were the unread
    # bytes left in the socket, the close would be a reset, and a reset may make the client
    # lose that answer (rhea then reported ECONNRESET, not the refusal).
    with BrokerProcess("--store", "memory") as broker:
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.sendall(b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n" + b"x" * 200_000)
            sock.settimeout(5)
            answer = b""
            while chunk := sock.recv(65536):  # a reset raises ConnectionResetError here
                answer += chunk
            sock.close()
            assert answer.startswith(b"AMQP")


def test_a_refused_client_whose_late_bytes_arrive_after_the_answer_is_not_reset() -> None:
    # A client that sends its open frame straight after its header (rhea, Proton) may have
    # that frame reach the broker after the broker refused the header and finished with
    # the connection. The broker lingers (amqp/lingering.py): it reads and drops what comes,
    # so the client reads the answer and an orderly end, never a reset.
    with BrokerProcess("--store", "memory") as broker:
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.settimeout(5)
        sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # not AMQP: refused with the broker's header
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        assert answer.startswith(b"AMQP")  # and then the end of the stream
        time.sleep(0.2)  # the broker is done with the connection by now
        sock.sendall(b"late bytes, as a pipelined open frame")
        time.sleep(0.2)  # were the socket closed, the kernel's reset has come back by now
        sock.sendall(b"more")  # after a reset: BrokenPipeError / ConnectionResetError
        sock.close()
        time.sleep(0.1)
        assert half_closed(broker.port) == 0


def test_a_tls_handshake_on_the_plain_port_is_answered_with_a_framing_error() -> None:
    # Proton's sniffing knows TLS and would close without a word; every other protocol
    # there gets AMQP's header and a framing error, and so does this one.
    with BrokerProcess("--store", "memory") as broker:
        sock = socket.create_connection(("127.0.0.1", broker.port))
        sock.settimeout(5)
        sock.sendall(b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(32))  # a ClientHello
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        sock.close()
        assert answer.startswith(b"AMQP\x00\x01\x00\x00")
        assert b"amqp:connection:framing-error" in answer
        assert b"TLS handshake on the plain AMQP port" in answer
        assert broker.logged("CON-1011 : TLS on plain port")


def test_a_broker_out_of_file_descriptors_rests_its_listener_and_serves_once_they_free_up() -> None:
    broker = BrokerProcess("--store", "memory").start()
    try:
        subprocess.run(["prlimit", "--pid", str(broker.pid), "--nofile=64:64"], check=True)
        held = [socket.create_connection((broker.host, broker.port)) for _ in range(100)]
        time.sleep(0.5)
        ticks = _cpu_ticks(broker.pid)
        time.sleep(1.0)
        assert _cpu_ticks(broker.pid) - ticks < 30  # resting, not spinning (100 a second)
        for sock in held:
            sock.close()
        conn = BlockingConnection(broker.url, timeout=10)  # served again
        conn.create_sender("after").send(Message(body="x"))
        conn.close()
    finally:
        broker.stop()
    rests = [line for line in broker.output if "BRK-1011" in line]
    assert 1 <= len(rests) <= 40  # one line a pause of 100 ms, at most
    assert not [line for line in broker.output if "Traceback" in line or "handler fault" in line]


def _cpu_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime and stime
