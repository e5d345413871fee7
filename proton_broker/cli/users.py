"""``proton-broker-config user ...``: manage the broker's users, on the broker's machine.

Commands::

    proton-broker-config user add NAME      [--config FILE | --data-dir DIR | --user-db FILE]
    proton-broker-config user passwd NAME   [...]
    proton-broker-config user delete NAME   [...]
    proton-broker-config user list          [...] [--json]

Rules this module owns:

* The users are in the broker's sasldb file (``sasl.user_db``, by default users.sasldb in
  the data directory), found from the broker's configuration exactly as the broker finds
  it (``--config``, default conf/broker.yaml, and ``PROTON_BROKER_*`` variables), or named
  with ``--user-db``. Like qpidd's ``saslpasswd2``, this works on the file, not over AMQP:
  a running broker sees the change at the next authentication.
* A password is never taken from the command line: from a prompt (asked twice) when the
  input is a terminal, else the first line of the standard input, so scripts can pipe it.
* Exit status 0 done, 1 the command could not be done (a message on stderr), 2 usage.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from proton_broker import config
from proton_broker.errors import ConfigError
from proton_broker.security.users import UserDatabase, UserError, user_db_path

DEFAULT_CONFIG = "conf/broker.yaml"
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
ACTIONS = ("add", "passwd", "delete", "list")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="proton-broker-config user",
        description="Add, change, delete and list the users the broker authenticates "
        "(a Cyrus sasldb file; passwords are read from a prompt or stdin, never argv).",
        epilog="Exit status: 0 done, 1 failed, 2 usage error.",
    )
    parser.add_argument("action", choices=ACTIONS)
    parser.add_argument("name", nargs="?", help="the user (not for list)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--config", metavar="FILE", help=f"the broker's configuration (default {DEFAULT_CONFIG})"
    )
    where.add_argument("--data-dir", metavar="DIR", help="the broker's data directory")
    where.add_argument("--user-db", metavar="FILE", help="the sasldb file itself")
    parser.add_argument("--json", action="store_true", help="list: print a JSON array")
    return parser


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.action == "list") == (args.name is not None):
        parser.error("list takes no name" if args.name else f"{args.action} needs a user name")
    try:
        users = UserDatabase(_user_db(args))
        if args.action == "list":
            names = users.names()
            print(json.dumps(names) if args.json else "\n".join(names))
            return EXIT_OK
        if args.action == "delete":
            users.delete(args.name)
        else:
            password = _password(args.name)
            getattr(users, args.action)(args.name, password)
    except (UserError, ConfigError) as exc:
        print(f"Failed: {exc}", file=sys.stderr)
        return EXIT_FAILED
    return EXIT_OK


def _user_db(args: argparse.Namespace) -> Path:
    if args.user_db:
        return Path(args.user_db)
    overrides = {"broker": {"data_dir": args.data_dir}} if args.data_dir else None
    path = args.config or DEFAULT_CONFIG
    cfg = config.load(path, overrides=overrides, must_exist=args.config is not None)
    return user_db_path(cfg)


def _password(name: str) -> str:
    if not sys.stdin.isatty():
        return sys.stdin.readline().rstrip("\r\n")
    first = getpass.getpass(f"Password for {name}: ")
    if getpass.getpass("Again: ") != first:
        raise UserError("the two passwords differ")
    return first
