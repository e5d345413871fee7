"""``proton-broker-config``'s exchange and binding commands, in qpid-config's syntax::

    add exchange TYPE NAME [--durable] [--alternate-exchange NAME] [--argument KEY=VALUE ...]
    del exchange NAME
    exchanges [FILTER]                  (a table: name, type, durable, bindings, counters)
    bind EXCHANGE QUEUE [KEY] [all|any NAME=VALUE ...]   (the last: a headers binding)
    unbind EXCHANGE QUEUE [KEY]
    bindings [EXCHANGE]

Each is one request to the ``$management`` node (Broker-J's ``org.apache.qpid.Exchange``
and ``org.apache.qpid.Binding`` types). A headers binding's values are sent as text, as
qpid-config sends them; numbers in a message's properties do not equal them (the broker
compares types), so match numbers through the management node or the config file.
``--alternate-exchange`` becomes the exchange argument ``alternate-exchange`` (as qpidd's).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from proton_broker.cli import listings
from proton_broker.cli.client import ManagementClient
from proton_broker.cli.output import alternate_column, ok, print_json, print_table

EXCHANGE_TYPE = "org.apache.qpid.Exchange"
BINDING_TYPE = "org.apache.qpid.Binding"
EXCHANGE_TYPES = ("direct", "topic", "fanout", "headers")
MATCH_MODES = ("all", "any")
ALTERNATE = "alternate-exchange"  # qpidd's name, for queues and exchanges alike
EXCHANGE_COLUMNS = [
    ("Exchange", "name"),
    ("Type", "qpid-type"),  # the kind (topic); "type" is its class name, as Broker-J's
    ("Dur", "durable"),
    ("Bindings", "bindingCount"),
    ("Routed", "messagesRouted"),
    ("Dropped", "messagesDropped"),
]
BINDING_COLUMNS = [
    ("Exchange", "exchange"),
    ("Queue", "queue"),
    ("Key", "bindingKey"),
    ("Arguments", "arguments"),
]

Command = Callable[[ManagementClient, argparse.Namespace], int]


def command_for(words: list[str]) -> tuple[Command, str | None] | None:
    """The command these words name and what is wrong with them (None: not ours)."""
    head = words[:2]
    if head == ["add", "exchange"]:
        if len(words) != 4 or words[2] not in EXCHANGE_TYPES:
            return add_exchange, f"usage: add exchange {'|'.join(EXCHANGE_TYPES)} NAME"
        return add_exchange, None
    if head == ["del", "exchange"]:
        return del_exchange, None if len(words) == 3 else "usage: del exchange NAME"
    if words[:1] == ["exchanges"]:
        return list_exchanges, None if len(words) <= 2 else "usage: exchanges [FILTER]"
    if words[:1] == ["bindings"]:
        return list_bindings, None if len(words) <= 2 else "usage: bindings [EXCHANGE]"
    if words[:1] == ["bind"]:
        return bind, _bind_problem(words)
    if words[:1] == ["unbind"]:
        return unbind, None if len(words) in (3, 4) else "usage: unbind EXCHANGE QUEUE [KEY]"
    return None


def _bind_problem(words: list[str]) -> str | None:
    usage = "usage: bind EXCHANGE QUEUE [KEY [all|any NAME=VALUE ...]]"
    if len(words) < 3:
        return usage
    conditions = words[4:]  # after the key, always the third word (qpid-config's rule)
    if conditions and (
        conditions[0] not in MATCH_MODES
        or len(conditions) < 2
        or not all("=" in w for w in conditions[1:])
    ):
        return f"{usage}: a headers binding needs 'all' or 'any' plus NAME=VALUE conditions"
    return None


def argument_problem(args: argparse.Namespace) -> str | None:
    """What is wrong with ``add exchange``'s ``--argument`` values (None: they are
    NAME=VALUE, none of them repeating ``--alternate-exchange``)."""
    bad = [item for item in args.argument if not item.partition("=")[0] or "=" not in item]
    if bad:
        return f"--argument needs NAME=VALUE, got {bad[0]!r}"
    if args.alternate_exchange is not None and ALTERNATE in _pairs(args.argument):
        return f"--argument {ALTERNATE} repeats a setting given by another option"
    return None


def add_exchange(client: ManagementClient, args: argparse.Namespace) -> int:
    kind, name = args.command[2], args.command[3]
    # Broker-J takes the kind from `qpid-type` only (a body `type` alone is a 400 there).
    # Always says which: the node's default, as Broker-J's, is durable; qpid-config's is not.
    body: dict[str, Any] = {"name": name, "type": kind, "qpid-type": kind, "durable": args.durable}
    arguments = _pairs(args.argument)
    said = arguments.pop("durable", None)  # qpid-config sends it among the arguments too
    if said is not None and not args.durable:
        body["durable"] = said  # read by the node as any CREATE's durable
    if args.alternate_exchange is not None:
        arguments[ALTERNATE] = args.alternate_exchange
    if arguments:
        body["arguments"] = arguments
    reply = ok(client.request("CREATE", EXCHANGE_TYPE, name, body))
    if args.json:
        print_json(reply.body)
    return 0


def del_exchange(client: ManagementClient, args: argparse.Namespace) -> int:
    name = args.command[2]
    ok(client.request("DELETE", EXCHANGE_TYPE, name))
    if args.json:
        print_json({"name": name, "deleted": True})
    return 0


def bind(client: ManagementClient, args: argparse.Namespace) -> int:
    exchange, queue, *rest = args.command[1:]
    key = rest.pop(0) if rest else ""  # "all" there is a key, as qpid-config reads it
    body: dict[str, Any] = {}
    if rest:
        body["arguments"] = {"x-match": rest[0], **_pairs(rest[1:])}
    reply = ok(client.request("CREATE", BINDING_TYPE, key, body, exchange=exchange, queue=queue))
    if args.json:
        print_json(reply.body)
    return 0


def unbind(client: ManagementClient, args: argparse.Namespace) -> int:
    exchange, queue, *rest = args.command[1:]
    key = rest[0] if rest else ""
    ok(client.request("DELETE", BINDING_TYPE, key, exchange=exchange, queue=queue))
    if args.json:
        print_json({"exchange": exchange, "queue": queue, "key": key, "deleted": True})
    return 0


def list_exchanges(client: ManagementClient, args: argparse.Namespace) -> int:
    """qpid-config's ``exchanges [FILTER]``: the exchanges whose name holds FILTER (none:
    exit 1); ``-r``, each with its bindings (cli/listings.py)."""
    name_filter = args.command[1] if len(args.command) == 2 else ""
    if args.recursive:
        return listings.exchange_tree(client, name_filter)
    rows = listings.matching(client.query(EXCHANGE_TYPE), name_filter)
    if not rows:
        return listings.EXIT_NONE_MATCHED
    if args.json:
        print_json(rows)
    else:
        shown = alternate_column(rows, EXCHANGE_COLUMNS)
        print_table(rows, shown, left=2 + len(shown) - len(EXCHANGE_COLUMNS))
    return 0


def list_bindings(client: ManagementClient, args: argparse.Namespace) -> int:
    wanted = {"exchange": args.command[1]} if len(args.command) == 2 else {}
    rows = client.query(BINDING_TYPE, **wanted)
    if args.json:
        print_json(rows)
    else:
        print_table(rows, BINDING_COLUMNS, left=len(BINDING_COLUMNS))
    return 0


def _pairs(items: list[str]) -> dict[str, str]:
    """NAME=VALUE words (checked by command_for and argument_problem) as a map."""
    return dict(item.partition("=")[::2] for item in items)
