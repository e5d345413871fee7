"""The user database: a Cyrus sasldb file, managed with Cyrus's own tools.

Rules this module owns:

* Users and passwords live where the broker's authentication (Cyrus SASL, through Proton)
  reads them: a sasldb file, as qpidd keeps them. It is written only by Cyrus's
  ``saslpasswd2`` (Debian's ``sasl2-bin``) and listed by ``sasldblistusers2``: this code
  hands a password to ``saslpasswd2`` on its standard input and never stores, logs or
  puts one on a command line. Cyrus keeps what its mechanisms need to check a password
  (SCRAM needs it), so the file is made readable by its owner only.
* User names are what a client sends: letters, digits and ``._-``, up to 64 characters,
  in the host's realm (Cyrus's default realm is the host name, for saslpasswd2 and for the
  broker alike). A password is 1 to 1,024 characters, not starting or ending with blanks.
* A client may name the realm (``alice@HOST``), and Cyrus then answers with it; that realm
  (or qpidd's ``QPID``) is this broker's own, so the broker user is the name without it
  (:func:`password_user`): the AMQP and HTTP logins and the ACL file all mean ``alice``.
  A user of another realm keeps it.
* Every failure is a :class:`UserError` with a sentence an operator can act on.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
from pathlib import Path

from proton_broker.config import Config, file_problem

NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
QPID_REALM = "QPID"  # qpidd's default realm (its --realm)
MAX_PASSWORD = 1024
SASLPASSWD = "saslpasswd2"
LISTUSERS = "sasldblistusers2"
_TOOL_PACKAGE = "sasl2-bin"


def own_realm(realm: str) -> bool:
    """Whether ``realm`` is this broker's: the host name (Cyrus's default realm, the one
    ``proton-broker-config user`` adds users to) or qpidd's default, ``QPID`` (qpidd's
    sasldb and ACL files name users ``alice@QPID``)."""
    return realm in (socket.gethostname(), QPID_REALM)


def password_user(name: str) -> str:
    """The broker user ``name`` (as a password login's client or Cyrus gives it) is:
    ``alice`` for ``alice``, ``alice@HOST`` and ``alice@QPID``, the realm being this
    broker's own; a name in another realm stays whole."""
    user, at, realm = name.rpartition("@")
    return user if at and user and own_realm(realm) else name


def user_db_path(config: Config) -> Path:
    """The broker's sasldb file: ``sasl.user_db``, else users.sasldb in its data directory."""
    path = config.sasl.user_db or str(Path(config.broker.data_dir) / "users.sasldb")
    return Path(path).resolve()


def user_db_problem(config: Config) -> str | None:
    """Why the broker cannot read its users, or None. A ``sasl.user_db`` that is named must
    be a file: a missing one (a typo, a volume not mounted) would fail every password login
    with nothing said at start-up. The default file in the data directory may be absent
    (a new broker has no users yet); a directory in its place is wrong all the same."""
    path = user_db_path(config)
    missing = not path.exists()
    if missing and not config.sasl.user_db:
        return None
    problem = file_problem(path)
    if problem is None:
        return None
    named = f"configuration key 'sasl.user_db'{'' if config.sasl.user_db else ' (default)'}"
    hint = " (proton-broker-config user add makes it)" if missing else ""
    return f"{named}: {problem}{hint}"


class UserError(Exception):
    """A user command that cannot be done, said plainly."""


class UserDatabase:
    """The sasldb file at ``path``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).resolve()

    def add(self, name: str, password: str) -> None:
        """Create user ``name``; UserError if it exists."""
        _check_name(name)
        if name in self.names():
            raise UserError(f"user '{name}' exists already (use passwd to change its password)")
        self._set(name, password, create=True)

    def passwd(self, name: str, password: str) -> None:
        """Change the password of user ``name``; UserError if there is no such user."""
        _check_name(name)
        if name not in self.names():
            raise UserError(f"no user '{name}' in {self.path}")
        self._set(name, password, create=False)

    def delete(self, name: str) -> None:
        _check_name(name)
        if name not in self.names():
            raise UserError(f"no user '{name}' in {self.path}")
        _run([_tool(SASLPASSWD), "-d", "-f", str(self.path), name], "")

    def names(self) -> list[str]:
        """The users of this host's realm, sorted (users of another realm as name@realm)."""
        if not self.path.exists():
            return []
        out = _run([_tool(LISTUSERS), "-f", str(self.path)], None)
        realm = socket.gethostname()
        found = set()
        for line in out.splitlines():
            user = line.split(":", 1)[0].strip()
            if user:
                name, _, user_realm = user.rpartition("@")
                found.add(name if user_realm == realm else user)
        return sorted(found)

    def _set(self, name: str, password: str, create: bool) -> None:
        _check_password(password)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        command = [_tool(SASLPASSWD), "-p", "-f", str(self.path)]
        _run([*command, *(["-c"] if create else []), name], password)
        os.chmod(self.path, 0o600)


def _check_name(name: str) -> None:
    if not NAME.fullmatch(name):
        raise UserError(f"bad user name {name!r}: use 1 to 64 letters, digits, '.', '_' or '-'")


def _check_password(password: str) -> None:
    if not password:
        raise UserError("the password is empty")
    if len(password) > MAX_PASSWORD:
        raise UserError(f"the password is longer than {MAX_PASSWORD} characters")
    if password != password.strip():
        raise UserError("the password starts or ends with blanks (a stray newline?)")
    if "\n" in password or "\0" in password:
        raise UserError("the password holds a line break or a NUL character")


def _tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")
    if found is None:
        raise UserError(f"{name} is not installed: install Debian's {_TOOL_PACKAGE}")
    return found


def _run(command: list[str], stdin: str | None) -> str:
    """Run a Cyrus tool; UserError with what it said if it fails."""
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, check=False, timeout=30
    )
    if result.returncode != 0:
        said = (result.stderr or result.stdout).strip() or f"exit status {result.returncode}"
        raise UserError(f"{Path(command[0]).name} failed: {said}")
    return result.stdout
