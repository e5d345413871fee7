"""``proton-broker-config``: manage queues the way ``qpid-config`` does, over AMQP management.

Commands (as qpid-config spells them; options may come before or after the words)::

    proton-broker-config [-b URL] add queue NAME [--durable] [--lvq-key KEY] ...
    proton-broker-config [-b URL] del queue NAME [--force]
    proton-broker-config [-b URL] queues [--interval SECONDS]
    proton-broker-config [-b URL] queue NAME
    proton-broker-config [-b URL] acl reload   (read the broker's ACL file again)
    proton-broker-config [-b URL] add exchange TYPE NAME | del exchange NAME | exchanges
    proton-broker-config [-b URL] bind|unbind EXCHANGE QUEUE [KEY] | bindings   (cli/exchanges.py)
    proton-broker-config user add|passwd|delete|list [NAME]   (cli/users.py)

Rules this module owns:

* The tool is a plain client of the ``$management`` node (:mod:`.client`), so it works
  against a remote broker, and against other brokers with that node (Qpid Broker-J): the
  options become Broker-J attribute names (``lvqKey``, ``messageGroupKeyOverride``,
  ``maximumQueueDepthBytes``, ...); ``--argument KEY=VALUE`` passes any other option
  through as a string, and the broker validates it as it would on an attach.
* ``--alternate-exchange NAME`` (``add queue`` and ``add exchange``) goes as qpidd's
  ``alternate-exchange``, the one option sent under its qpid name: qpid-config users mean
  qpidd's option, and this broker takes a queue or an exchange under it (Broker-J's
  ``alternateBinding``; see :mod:`proton_broker.deadletters`). Listings show an
  ``Alternate`` column only when some entity has one.
* Exit codes a shell user expects: 0 done, 1 the broker refused (or could not be reached),
  2 a usage error. Errors go to stderr as ``Failed: ...``, as qpid-config prints them.
  Success is silent for ``add`` and ``del`` (as qpid-config) unless ``--json`` is given.
* ``--json`` prints the broker's answer as JSON on stdout, for scripts.
* The broker is ``-b``, else ``$PROTON_CONFIG_BROKER``, else ``localhost:5672`` (as
  qpid-config), so qpid-config command lines work unchanged; qpid-config's
  ``user/password@host`` form is read as ``user:password@host``.
* ``queues`` shows rates from two snapshots ``--interval`` seconds apart (0: no rates).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from proton import ConnectionException, SSLException, Timeout

from proton_broker.cli import exchanges, listings
from proton_broker.cli.client import ManagementClient, Refused, tls_settings
from proton_broker.cli.output import (
    alternate_column,
    ok,
    print_json,
    print_table,
    text,
)

DEFAULT_BROKER = "localhost:5672"
# The default for -b when set (not PROTON_BROKER_*: that prefix is the broker's own config).
BROKER_ENV = "PROTON_CONFIG_BROKER"
QUEUE_TYPE = "org.apache.qpid.Queue"
LIMIT_POLICIES = (
    "none",
    "ring",
    "reject",
    "flow-to-disk",
    "producer-flow-control",
    "self-destruct",
)
# qpid-config's options sent as the qpid option of the same name (qpid.flow_stop_size...).
FLOW_OPTIONS = {
    "flow-stop-size": "producers are stopped when the queue holds this many bytes",
    "flow-stop-count": "producers are stopped when the queue holds this many messages",
    "flow-resume-size": "stopped producers go on when the bytes fall to this",
    "flow-resume-count": "stopped producers go on when the messages fall to this",
    "file-count": "qpidd's store file count (accepted; no effect here)",
    "file-size": "qpidd's store file size (accepted; no effect here)",
}
TABLE_ATTRIBUTES = [
    "name",
    "type",  # the kind's class name (org.apache.qpid.LastValueQueue), as Broker-J answers
    "qpid-type",  # the kind (lvq): the table's Type column
    "durable",
    "queueDepthMessages",
    "queueDepthBytes",
    "consumerCount",
    "totalEnqueuedMessages",
    "totalDequeuedMessages",
    "alternateBinding",
]
EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2
_ADD_ONLY = (
    "durable",
    "lvq_key",
    "group_header",
    "shared_groups",
    "priorities",
    "sort_key",
    "max_queue_size",
    "max_queue_count",
    "limit_policy",
    "alternate_exchange",
    "argument",
    *(option.replace("-", "_") for option in FLOW_OPTIONS),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="proton-broker-config",
        description="Create, delete and inspect queues of an AMQP broker through its "
        "$management node (qpid-config style).",
        usage="%(prog)s [OPTIONS] add queue NAME [ADD OPTIONS]\n"
        "       %(prog)s [OPTIONS] del queue NAME [--force]\n"
        "       %(prog)s [OPTIONS]   (an overview: how many exchanges and queues)\n"
        "       %(prog)s [OPTIONS] queues [FILTER] [-r] | exchanges [FILTER] [-r]\n"
        "       %(prog)s [OPTIONS] queue NAME\n"
        "       %(prog)s [OPTIONS] add exchange TYPE NAME [--durable] [--alternate-exchange NAME]\n"
        "       %(prog)s [OPTIONS] del exchange NAME\n"
        "       %(prog)s [OPTIONS] bind EXCHANGE QUEUE [KEY] [all|any K=V ...]\n"
        "       %(prog)s [OPTIONS] unbind EXCHANGE QUEUE [KEY] | bindings [EXCHANGE]\n"
        "       %(prog)s [OPTIONS] reload-acl\n"
        "       %(prog)s user add|passwd|delete|list [NAME] (see: %(prog)s user --help)",
        epilog="Exit status: 0 done, 1 the broker refused or could not be reached, 2 usage error.",
    )
    parser.add_argument("command", nargs="*", help=argparse.SUPPRESS)
    _general_options(parser.add_argument_group("options"))
    _add_queue_options(parser.add_argument_group("add queue options"))
    delete = parser.add_argument_group("del queue options")
    delete.add_argument(
        "--force",
        action="store_true",
        help="delete the queue even if it holds messages or has consumers",
    )
    delete.add_argument(  # qpid-config's two halves of --force
        "--force-if-not-empty",
        action="store_true",
        help="delete the queue even if it holds messages (not if it has consumers)",
    )
    delete.add_argument(
        "--force-if-used",
        action="store_true",
        help="delete the queue even if it has consumers (not if it holds messages)",
    )
    return parser


def broker_address(text: str) -> str:
    """The broker's URL: qpid-config's ``[scheme://]user/password@host[:port]`` becomes
    ``[scheme://]user:password@host[:port]``, the password percent-encoded (so that a ``/``
    or ``:`` in it stays in it); anything else is taken as it is."""
    scheme, sep, rest = text.rpartition("://")
    if "@" in rest:
        userinfo, host = rest.rsplit("@", 1)
        if "/" in userinfo and ":" not in userinfo:
            user, password = userinfo.split("/", 1)
            return f"{scheme}{sep}{user}:{quote(password, safe='')}@{host}"
    return text


def _general_options(general: argparse._ArgumentGroup) -> None:
    """The connection and output options every command takes."""
    general.add_argument(
        "-b",
        "--broker",
        "-a",
        "--broker-addr",
        dest="broker",
        type=broker_address,
        default=os.environ.get(BROKER_ENV) or DEFAULT_BROKER,
        metavar="URL",
        help=f"broker address, [amqp://][user[:password]@]host[:port], or qpid-config's "
        f"user/password@host[:port] (default ${BROKER_ENV}, else {DEFAULT_BROKER})",
    )
    general.add_argument(
        "-t",
        "--timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how long to wait for the broker (default 10)",
    )
    general.add_argument(
        "--sasl-mechanism",
        metavar="MECHS",
        help="the SASL mechanisms to offer, space-separated (default: any the broker offers)",
    )
    general.add_argument(
        "--ssl-certificate", metavar="FILE", help="client certificate (PEM) for an amqps URL"
    )
    general.add_argument(
        "--ssl-key", metavar="FILE", help="its private key (PEM; default: in the certificate)"
    )
    general.add_argument(
        "--ssl-trustfile",
        metavar="FILE",
        help="CA certificates (PEM) to trust for an amqps URL instead of the system's",
    )
    general.add_argument(
        "--json", action="store_true", help="print the broker's answer as JSON (for scripts)"
    )
    general.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="queues: measure rates over this long (default 1; 0: no rates)",
    )
    general.add_argument(
        "-r",
        "--recursive",
        action="store_true",
        help="queues, exchanges: show each one's bindings (qpid-config's tree)",
    )
    general.add_argument(
        "--ignore-default",
        action="store_true",
        help="leave the default exchange out of listings (this broker lists none)",
    )


def _add_queue_options(add: argparse._ArgumentGroup) -> None:
    """qpid-config's ``add queue`` options (the rest go through ``--argument``)."""
    add.add_argument("--durable", action="store_true", help="the queue survives a restart")
    add.add_argument(
        "--lvq-key", metavar="KEY", help="last-value queue keyed by this application property"
    )
    add.add_argument(
        "--group-header",
        metavar="KEY",
        help="message groups: the application property holding the group id",
    )
    add.add_argument(
        "--shared-groups",
        action="store_true",
        help="groups are shared by consumers in order (one holder at a time)",
    )
    add.add_argument(
        "--priorities", type=int, metavar="N", help="priority queue with N levels (1-10)"
    )
    add.add_argument(
        "--sort-key", metavar="KEY", help="sorted queue ordered by this application property"
    )
    add.add_argument(
        "--max-queue-size", type=int, metavar="BYTES", help="limit on the bytes queued"
    )
    add.add_argument(
        "--max-queue-count", type=int, metavar="N", help="limit on the messages queued"
    )
    add.add_argument("--limit-policy", choices=LIMIT_POLICIES, help="what happens at the limit")
    for option, what in FLOW_OPTIONS.items():
        add.add_argument(f"--{option}", type=int, metavar="N", help=what)
    add.add_argument(
        "--alternate-exchange",
        metavar="NAME",
        help="where rejected and undeliverable messages go: an exchange or a queue "
        "(also for 'add exchange': where it sends what it routes nowhere)",
    )
    add.add_argument(
        "--argument",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="any other queue option, e.g. qpid.max_count=10 (repeatable)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["user"]:  # local: the user database (cli/users.py)
        from proton_broker.cli import users

        return users.main(words[1:])
    parser = build_parser()
    args = parser.parse_intermixed_args(words)
    command = _command(parser, args)
    try:
        tls = tls_settings(args.ssl_certificate, args.ssl_key, args.ssl_trustfile)
    except SSLException as exc:  # a file that is missing or not PEM
        print(f"Failed: cannot use the TLS files given: {exc}", file=sys.stderr)
        return EXIT_USAGE
    timeout = args.timeout or None  # qpid-config's 0: wait as long as it takes
    try:
        with ManagementClient(args.broker, timeout, tls, args.sasl_mechanism) as client:
            return command(client, args)
    except BrokenPipeError:  # the reader of our output went (`... | head`): nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
        return EXIT_OK
    except Refused as exc:
        print(f"Failed: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except (ConnectionException, Timeout, OSError) as exc:
        said = _redacted(f"cannot reach the broker at {args.broker}: {exc or type(exc).__name__}")
        print(f"Failed: {said}", file=sys.stderr)
        return EXIT_REFUSED
    except ValueError as exc:  # Proton's reading of the URL (a port that is no number ...)
        print(f"Failed: {_redacted(f'invalid broker URL {args.broker}: {exc}')}", file=sys.stderr)
        return EXIT_USAGE


def _redacted(text: str) -> str:
    """``text`` with the password of any ``user:password@`` URL in it hidden (a password
    may hold ``/`` and ``:``, not ``@``)."""
    return re.sub(r"(^|\s)([a-z][a-z0-9+.-]*://)?([^:/@\s]+):[^@\s]*@", r"\1\2\3:***@", text)


def _command(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Any:
    """The function for the command words, after checking them (exit 2 if wrong)."""
    chosen = _chosen(parser, args.command)
    allowed = (
        ("durable", "alternate_exchange", "argument") if chosen is exchanges.add_exchange else ()
    )
    if chosen is not add_queue:
        given = [
            f"--{name.replace('_', '-')}"
            for name in _ADD_ONLY
            if name not in allowed and getattr(args, name) not in (None, False, [])
        ]
        if given:
            parser.error(f"{', '.join(given)} only go with 'add queue'")
    if (args.force or args.force_if_not_empty or args.force_if_used) and chosen is not del_queue:
        parser.error("--force only goes with 'del queue'")
    if chosen is add_queue:
        args.attributes = queue_attributes(parser, args)
    if chosen is exchanges.add_exchange and (problem := exchanges.argument_problem(args)):
        parser.error(problem)
    return chosen


def _chosen(parser: argparse.ArgumentParser, words: list[str]) -> Any:
    """The command the words name (exit 2 if none does)."""
    if words[:2] == ["add", "queue"] and len(words) == 3:
        return add_queue
    if words[:2] == ["del", "queue"] and len(words) == 3:
        return del_queue
    if not words:
        return listings.overview
    if words[:1] == ["queues"] and len(words) <= 2:
        return list_queues
    if words[:1] == ["queue"] and len(words) == 2:
        return show_queue
    if words in (["acl", "reload"], ["reload-acl"]):  # ours, and qpid-config's
        return reload_acl
    found = exchanges.command_for(words)
    if found is None:
        parser.error(f"unknown command {' '.join(words)!r}")
    chosen, wrong = found
    if wrong is not None:
        parser.error(wrong)
    return chosen


def queue_attributes(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:  # noqa: C901 - one branch per queue attribute
    """The CREATE body for ``add queue``: Broker-J attribute names but for the limits,
    which keep qpid-config's (so qpidd's default policy, reject with flow control from 80%,
    comes with them: queues/settings.py), then --argument."""
    body: dict[str, Any] = {"durable": args.durable}  # said either way: Broker-J's default is true
    if args.lvq_key is not None:
        body["lvqKey"] = args.lvq_key
    if args.group_header is not None:
        body["messageGroupKeyOverride"] = args.group_header
        body["messageGroupType"] = "SHARED_GROUPS" if args.shared_groups else "STANDARD"
    elif args.shared_groups:
        body["messageGroupType"] = "SHARED_GROUPS"
    if args.priorities is not None:
        body["priorities"] = args.priorities
    if args.sort_key is not None:
        body["sortKey"] = args.sort_key
    if args.max_queue_size is not None:
        body["qpid.max_size"] = args.max_queue_size
    if args.max_queue_count is not None:
        body["qpid.max_count"] = args.max_queue_count
    if args.limit_policy not in (None, "none"):  # none: "use the broker's default policy"
        body["overflowPolicy"] = args.limit_policy.upper().replace("-", "_")
    if args.alternate_exchange is not None:
        body[exchanges.ALTERNATE] = args.alternate_exchange
    for option in FLOW_OPTIONS:
        value = getattr(args, option.replace("-", "_"))
        if value is not None:
            body["qpid." + option.replace("-", "_")] = value
    for item in args.argument:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--argument needs KEY=VALUE, got {item!r}")
        if key in body:
            parser.error(f"--argument {key} repeats a setting given by another option")
        body[key] = value
    return body


# ---- commands ------------------------------------------------------------------------------


def add_queue(client: ManagementClient, args: argparse.Namespace) -> int:
    name = args.command[2]
    reply = ok(client.request("CREATE", QUEUE_TYPE, name, {"name": name, **args.attributes}))
    if args.json:
        print_json(reply.body)
    return EXIT_OK


def del_queue(client: ManagementClient, args: argparse.Namespace) -> int:
    name = args.command[2]
    # qpid-config's rule: refused if it holds messages or has consumers, unless told
    props = {
        "force": args.force or args.force_if_not_empty,
        "ifUnused": not (args.force or args.force_if_used),
    }
    ok(client.request("DELETE", QUEUE_TYPE, name, **props))
    if args.json:
        print_json({"name": name, "deleted": True})
    return EXIT_OK


def reload_acl(client: ManagementClient, args: argparse.Namespace) -> int:
    """The management node's RELOAD-ACL (qpidd's ``reloadACLFile`` method)."""
    reply = ok(client.node("RELOAD-ACL"))
    if args.json:
        print_json(reply.body)
    else:
        print(reply.description)
    return EXIT_OK


def show_queue(client: ManagementClient, args: argparse.Namespace) -> int:
    reply = ok(client.request("READ", QUEUE_TYPE, args.command[1]))
    if args.json:
        print_json(reply.body)
        return EXIT_OK
    attributes = reply.body if isinstance(reply.body, dict) else {}
    width = max((len(str(k)) for k in attributes), default=0)
    for key, value in attributes.items():
        print(f"{key:<{width}}  {text(value)}")
    return EXIT_OK


def list_queues(client: ManagementClient, args: argparse.Namespace) -> int:
    """qpid-config's ``queues [FILTER]``: a table of the queues whose name holds FILTER,
    with rates over ``--interval``; ``-r``, each with its bindings (cli/listings.py)."""
    name_filter = args.command[1] if len(args.command) == 2 else ""
    if args.recursive:
        return listings.queue_tree(client, name_filter)
    before, started = _snapshot(client, name_filter), time.monotonic()
    if not before:
        return listings.EXIT_NONE_MATCHED  # qpid-config's answer to a filter nothing matches
    rows = before
    if args.interval > 0:
        time.sleep(args.interval)
        rows = _snapshot(client, name_filter)
        elapsed = time.monotonic() - started
        for name, row in rows.items():
            old = before.get(name, {})
            for total, rate in (
                ("totalEnqueuedMessages", "enqueueRate"),
                ("totalDequeuedMessages", "dequeueRate"),
            ):
                if isinstance(row.get(total), int) and isinstance(old.get(total), int):
                    row[rate] = round((row[total] - old[total]) / elapsed, 1)
    if args.json:
        print_json(list(rows.values()))
        return EXIT_OK
    shown = [
        (title, key)
        for title, key in COLUMNS
        if key not in ("enqueueRate", "dequeueRate") or any(key in r for r in rows.values())
    ]
    listed = list(rows.values())
    with_alternate = alternate_column(listed, shown)
    print_table(listed, with_alternate, left=2 + len(with_alternate) - len(shown))
    return EXIT_OK


def _snapshot(client: ManagementClient, name_filter: str) -> dict[str, dict[str, Any]]:
    rows = listings.matching(client.query(QUEUE_TYPE, TABLE_ATTRIBUTES), name_filter)
    return {
        str(row.get("name")): row for row in rows if row.get("name") != client.reply_to
    }  # not the tool's own reply queue


COLUMNS = [
    ("Queue", "name"),
    ("Type", "qpid-type"),
    ("Dur", "durable"),
    ("Msgs", "queueDepthMessages"),
    ("Bytes", "queueDepthBytes"),
    ("Cons", "consumerCount"),
    ("Enq", "totalEnqueuedMessages"),
    ("Deq", "totalDequeuedMessages"),
    ("Enq/s", "enqueueRate"),
    ("Deq/s", "dequeueRate"),
]


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
