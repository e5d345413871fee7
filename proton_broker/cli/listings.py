"""qpid-config's other listings: the overview, name filters and the binding trees (``-r``).

Rules this module owns, each as qpid-config has them:

* No command at all prints the overview: the number of exchanges, by type, and of queues,
  durable and not.
* ``queues FILTER`` and ``exchanges FILTER`` list only the entities whose name contains
  FILTER; when none does, nothing is printed and the exit status is 1.
* ``-r``/``--recursive`` prints each queue with the bindings that route to it
  (``Queue 'q'`` then ``    bind [KEY] => EXCHANGE``), or each exchange with its bindings
  (``Exchange 'x' (TYPE)`` then ``    bind [KEY] => QUEUE``); a headers binding's
  arguments follow on its line.
* ``--ignore-default`` leaves out the default exchange. This broker lists no default
  exchange (a message to a queue's name reaches it without one), so there is nothing to
  leave out; the option is taken so that qpid-config command lines run unchanged.
"""

from __future__ import annotations

import argparse
from collections import Counter
from typing import Any

from proton_broker.cli.client import ManagementClient

QUEUE_TYPE = "org.apache.qpid.Queue"
EXCHANGE_TYPE = "org.apache.qpid.Exchange"
BINDING_TYPE = "org.apache.qpid.Binding"
EXIT_OK, EXIT_NONE_MATCHED = 0, 1


def matching(rows: list[dict[str, Any]], name_filter: str) -> list[dict[str, Any]]:
    """The rows whose name contains ``name_filter`` (all of them for an empty filter)."""
    return [row for row in rows if name_filter in str(row.get("name"))]


def overview(client: ManagementClient, args: argparse.Namespace) -> int:
    """qpid-config with no command: how many exchanges of each type, how many queues."""
    exchanges = client.query(EXCHANGE_TYPE, ["name", "qpid-type"])
    queues = client.query(QUEUE_TYPE, ["name", "durable"])
    queues = [q for q in queues if q.get("name") != client.reply_to]
    print(f"Total Exchanges: {len(exchanges)}")
    for kind, count in Counter(str(x.get("qpid-type")) for x in exchanges).items():
        print(f"{kind:>15}: {count}")
    durable = sum(1 for q in queues if q.get("durable"))
    print()
    print(f"   Total Queues: {len(queues)}")
    print(f"        durable: {durable}")
    print(f"    non-durable: {len(queues) - durable}")
    return EXIT_OK


def queue_tree(client: ManagementClient, name_filter: str) -> int:
    """``queues -r``: every queue, and under it the bindings that route to it."""
    queues = matching(client.query(QUEUE_TYPE, ["name"]), name_filter)
    bindings = client.query(BINDING_TYPE, ["exchange", "queue", "bindingKey", "arguments"])
    for queue in queues:
        if queue.get("name") == client.reply_to:
            continue
        print(f"Queue '{queue.get('name')}'")
        for binding in bindings:
            if binding.get("queue") == queue.get("name"):
                print(_binding_line(binding, str(binding.get("exchange"))))
    return EXIT_OK


def exchange_tree(client: ManagementClient, name_filter: str) -> int:
    """``exchanges -r``: every exchange, with its type, and under it its bindings."""
    exchanges = matching(client.query(EXCHANGE_TYPE, ["name", "qpid-type"]), name_filter)
    bindings = client.query(BINDING_TYPE, ["exchange", "queue", "bindingKey", "arguments"])
    for exchange in exchanges:
        print(f"Exchange '{exchange.get('name')}' ({exchange.get('qpid-type')})")
        for binding in bindings:
            if binding.get("exchange") == exchange.get("name"):
                print(_binding_line(binding, str(binding.get("queue"))))
    return EXIT_OK


def _binding_line(binding: dict[str, Any], other_end: str) -> str:
    line = f"    bind [{binding.get('bindingKey') or ''}] => {other_end}"
    arguments = binding.get("arguments")
    return f"{line} {arguments}" if arguments else line
