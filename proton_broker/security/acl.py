"""The Qpid ACL file: reading it, and answering "may this user do this?".

The file format is qpidd's (Broker-J reads the same files with its ``AclFile`` access
control provider); the Qpid C++ broker book's "Authorization" chapter describes it. This
module knows nothing of the broker: the gate that applies it is
:mod:`proton_broker.security.access`.

Rules this module owns:

* Lines: ``group <name> <member>...``, ``acl <permission> <user|group|all> <action>
  [<object> [<property>=<value>...]]`` and ``quota connections|queues <n> <user|group|all>...``.
  ``#`` starts a comment line, blank lines are ignored, and a line ending in ``\\`` goes on
  on the next one. Keywords may be written in any case (Broker-J); names and values are
  case-sensitive. Permissions are ``allow``, ``allow-log``, ``deny`` and ``deny-log``.
* Actions: qpidd's ``access bind consume create delete move publish purge redirect reroute
  unbind update``, plus ``browse`` (Broker-J has no such action and qpidd checks browsers
  as consumers: a browser is allowed or denied by the first rule that names ``browse`` and
  matches, and by the ``consume`` rules, ``all`` included, when none does). Objects:
  ``broker connection exchange link method query queue``. ``all`` stands for every action
  or every object.
* Properties: ``name`` and the other qpidd property names, compared as text; a value ending
  in ``*`` matches any value with that prefix; ``routingkey`` matches as a topic pattern
  (``*`` one word, ``#`` any number of words); ``${user}``, ``${domain}`` and
  ``${userdomain}`` in a value stand for the user asking. The queue limits
  (``queuemaxsizeupperlimit``, ``queuemaxcountlowerlimit``, ... and the old names
  ``maxqueuesize``, ``maxqueuecount``) bound the value asked for: a rule whose bound is
  broken still matches, and then denies. A rule naming a property the request does not
  carry does not match it (except ``name``). A request made without properties (consuming,
  browsing, a management method or query) is matched by a rule naming other properties
  only if the rule denies: qpidd drops such rules as it loads the file ("Broker never
  checks..."), and this broker fails closed instead, so a rule that can never be checked
  can deny but never allow.
* Users: a rule names a user, a group or ``all``. Groups may contain groups defined
  before them. qpidd writes users as ``name@REALM``; this broker's password users have no
  realm, so ``alice@QPID`` (qpidd's default realm), ``alice@HOST`` (the host's, Cyrus's)
  and ``alice`` all name the user ``alice``, and qpidd files work unchanged. The user
  asking is matched by its exact name: a client certificate's user (SASL EXTERNAL, its
  CN) keeps whatever ``@`` it has, so ``alice@evil.example`` or ``alice@QPID`` from a
  certificate is not ``alice`` (names in other realms match exactly, as in qpidd).
* Deciding: the first rule, in file order, that names the user (or one of its groups, or
  ``all``), the action, the object and matching properties decides. When none does, the
  default decides: the last ``acl allow all all`` or ``acl deny all all`` line in the file
  (with or without ``-log``), wherever it stands, is not a rule but the default, as qpidd
  reads it (``AclReader::loadDecisionData``); without one the default is deny. Other such
  lines are rules in their place.
* Connections are decided apart, by ``create connection`` rules with a ``host`` property
  (``all``, an address, or ``first,last`` a range): the user's own rules first, then the
  rules for everyone, in file order; no matching rule allows (qpidd). ``acl deny all all``
  does not refuse connections.
* Quotas: ``quota connections`` and ``quota queues`` give each named user (a group: each
  member; ``all``: everyone not named) a limit from 0 (none allowed) to 65530; the last
  value given for a user counts.
* A file that cannot be read, or any line that is wrong, is an :class:`AclError` naming the
  file and the line, and nothing of the file is used: start-up stops, a reload keeps the
  rules in force.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from proton_broker.errors import ConfigError
from proton_broker.exchanges.topic import pattern_matches
from proton_broker.exchanges.topic import words as topic_words
from proton_broker.security.users import password_user

ACTIONS = (
    "access",
    "bind",
    "browse",
    "consume",
    "create",
    "delete",
    "move",
    "publish",
    "purge",
    "redirect",
    "reroute",
    "unbind",
    "update",
)
OBJECTS = ("broker", "connection", "exchange", "link", "method", "query", "queue")
PERMISSIONS = {  # permission -> (allows, logs)
    "allow": (True, False),
    "allow-log": (True, True),
    "deny": (False, False),
    "deny-log": (False, True),
}
# Properties compared with the request's value of the same name.
TEXT_PROPERTIES = frozenset(
    {
        "name",
        "durable",
        "owner",
        "routingkey",
        "autodelete",
        "exclusive",
        "type",
        "alternate",
        "queuename",
        "exchangename",
        "schemapackage",
        "schemaclass",
        "policytype",
        "paging",
        "host",
    }
)
# Limit properties: rule property -> (the request's property, True for an upper bound).
LIMIT_PROPERTIES = {
    "queuemaxsizelowerlimit": ("maxqueuesize", False),
    "queuemaxsizeupperlimit": ("maxqueuesize", True),
    "queuemaxcountlowerlimit": ("maxqueuecount", False),
    "queuemaxcountupperlimit": ("maxqueuecount", True),
    "filemaxsizelowerlimit": ("maxfilesize", False),
    "filemaxsizeupperlimit": ("maxfilesize", True),
    "filemaxcountlowerlimit": ("maxfilecount", False),
    "filemaxcountupperlimit": ("maxfilecount", True),
    "pageslowerlimit": ("maxpages", False),
    "pagesupperlimit": ("maxpages", True),
    "pagefactorlowerlimit": ("maxpagefactor", False),
    "pagefactorupperlimit": ("maxpagefactor", True),
    "maxqueuesize": ("maxqueuesize", True),  # qpidd's older names
    "maxqueuecount": ("maxqueuecount", True),
}
POLICY_TYPES = ("ring", "self-destruct", "reject")
MAX_QUOTA = 65530
ALL = "all"
DEFAULT_EXCHANGE = "amq.default"
EVERYONE = "*"  # the index key of rules for every user
GROUP_NAME = re.compile(r"[A-Za-z0-9_-]+")
USER_NAME = re.compile(r"[A-Za-z0-9_.@/-]+")
SUBSTITUTIONS = ("${user}", "${domain}", "${userdomain}")


class AclError(ConfigError):
    """The ACL file cannot be used; the message names the file and, for a bad line, its
    number."""


def user_key(name: str) -> str:
    """The broker user a name in the file stands for: ``alice@QPID`` and ``alice@HOST`` are
    the password user ``alice`` (security/users.py); any other name is itself."""
    return name if "=" in name else password_user(name)  # a certificate's subject: itself


@dataclass(frozen=True)
class Decision:
    """An answer: whether it is allowed, whether the rule asks for a log line, and the
    rule (None: no rule matched, the default deny)."""

    allowed: bool
    log: bool
    rule: Rule | HostRule | None

    def reason(self) -> str:
        if self.rule is None:
            return "no ACL rule allows it"
        return f"ACL rule at line {self.rule.line}: {self.rule.text}"


@dataclass(frozen=True)
class Limit:
    requested: str  # the request's property the bound applies to
    upper: bool
    value: int

    def holds(self, requested: str) -> bool:
        try:
            number = int(requested)
        except ValueError:
            return False
        return number <= self.value if self.upper else number >= self.value


@dataclass(frozen=True)
class Rule:
    """One ``acl`` line."""

    line: int
    text: str
    allows: bool
    logs: bool
    users: frozenset[str] | None  # None: all
    action: str | None  # None: every action
    object: str | None  # None: every object
    properties: tuple[tuple[str, str], ...] = ()
    limits: tuple[Limit, ...] = ()
    topic: tuple[str, ...] | None = field(default=None, compare=False)  # routingkey's words

    def decide(
        self, user: str, name: str | None, properties: Mapping[str, str] | None
    ) -> Decision | None:
        """This rule's answer for ``user``, or None if it does not match the request."""
        if properties is None and self.allows and self._needs_properties():
            return None  # it cannot be checked: it may deny, never allow (the module rules)
        if not all(
            self._matches(prop, value, user, name, properties) for prop, value in self.properties
        ):
            return None
        within = True
        if properties is not None:
            for limit in self.limits:
                if limit.requested not in properties:
                    return None
                within = within and limit.holds(properties[limit.requested])
        return Decision(self.allows and within, self.logs, self)

    def _needs_properties(self) -> bool:
        """Whether the rule names a property other than ``name``, or a limit."""
        return bool(self.limits) or any(prop != "name" for prop, _ in self.properties)

    def _matches(
        self,
        prop: str,
        pattern: str,
        user: str,
        name: str | None,
        properties: Mapping[str, str] | None,
    ) -> bool:
        if prop == "name":
            if pattern == DEFAULT_EXCHANGE and not name:
                return True  # qpidd's name for the default exchange, ''
            return _matches(_substitute(pattern, user), name or "")
        if properties is None:
            return True  # a deny rule (see decide): matched on its name alone
        if prop not in properties:
            return False
        if prop == "routingkey":
            return _topic_matches(self, pattern, user, properties[prop])
        return _matches(_substitute(pattern, user), properties[prop])


@dataclass(frozen=True)
class HostRule:
    """One ``create connection`` line: who, from which addresses."""

    line: int
    text: str
    allows: bool
    logs: bool
    users: frozenset[str] | None
    first: ipaddress.IPv4Address | ipaddress.IPv6Address | None  # None: every host
    last: ipaddress.IPv4Address | ipaddress.IPv6Address | None

    def covers(self, host: str) -> bool:
        if self.first is None or self.last is None:
            return True
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            return False
        if address.version != self.first.version:
            return False
        return self.first <= address <= self.last  # type: ignore[operator]


class Acl:
    """The rules of one ACL file, indexed for lookups."""

    def __init__(
        self,
        source: str,
        rules: list[Rule],
        host_rules: list[HostRule],
        groups: dict[str, frozenset[str]],
        connection_quotas: dict[str, int],
        queue_quotas: dict[str, int],
    ) -> None:
        self.source = source
        self.rules = rules
        self.host_rules = host_rules
        self.groups = groups
        self.connection_quotas = connection_quotas
        self.queue_quotas = queue_quotas
        self.default = _default_rule(rules)
        self._index = _index([rule for rule in rules if rule is not self.default])
        self._otherwise = (
            Decision(False, False, None)
            if self.default is None
            else Decision(self.default.allows, self.default.logs, self.default)
        )

    # ---- reading --------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path) -> Acl:
        """Read the file at ``path`` (AclError if it cannot be read or is wrong)."""
        try:
            text = Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise AclError(f"cannot read the ACL file {path}: {exc}") from None
        return cls.parse(text, str(path))

    @classmethod
    def parse(cls, text: str, source: str = "<acl>") -> Acl:
        return _Reader(source).read(text)

    # ---- deciding --------------------------------------------------------------------

    def authorise(
        self,
        user: str,
        action: str,
        obj: str,
        name: str | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> Decision:
        """The decision for ``user`` doing ``action`` on the ``obj`` called ``name``."""
        if action not in ACTIONS or obj not in OBJECTS:
            raise ValueError(f"no such ACL action or object: {action} {obj}")
        if action == "browse":  # rules that say browse, else the consume rules (qpidd's)
            found = self._first(user, "browse", obj, name, properties, said=True)
            if found is not None:
                return found
            action = "consume"
        found = self._first(user, action, obj, name, properties)
        return found if found is not None else self._otherwise

    def _first(
        self,
        user: str,
        action: str,
        obj: str,
        name: str | None,
        properties: Mapping[str, str] | None,
        said: bool = False,
    ) -> Decision | None:
        """The first matching rule's decision; ``said``: only rules naming the action.
        Rules are found by the user's exact name (see the module rules)."""
        table = self._index.get((action, obj))
        if not table:
            return None
        for rule in table.get(user, table.get(EVERYONE, ())):
            if said and rule.action != action:
                continue
            decision = rule.decide(user, name, properties)
            if decision is not None:
                return decision
        return None

    def connection(self, user: str, host: str) -> Decision:
        """Whether ``user`` may connect from ``host``, by the ``create connection`` rules."""
        own = [r for r in self.host_rules if r.users is not None and user in r.users]
        everyone = [r for r in self.host_rules if r.users is None]
        everyone.sort(key=lambda r: r.first is None)  # the host=all rule comes last (qpidd)
        for rule in own + everyone:
            if rule.covers(host):
                return Decision(rule.allows, rule.logs, rule)
        return Decision(True, False, None)

    def connection_quota(self, user: str) -> int | None:
        """The user's ``quota connections`` (None: the file gives none)."""
        return _quota(self.connection_quotas, user)

    def queue_quota(self, user: str) -> int | None:
        """The user's ``quota queues`` (None: the file gives none)."""
        return _quota(self.queue_quotas, user)

    def groups_of(self, user: str) -> list[str]:
        return sorted(name for name, members in self.groups.items() if user in members)


def _quota(quotas: Mapping[str, int], user: str) -> int | None:
    return quotas.get(user, quotas.get(ALL))


def _default_rule(rules: list[Rule]) -> Rule | None:
    """The last ``acl allow|deny all all`` line, which is the default (see the module
    rules), or None."""
    for rule in reversed(rules):
        if (
            rule.users is None
            and rule.action is None
            and rule.object is None
            and not rule.properties
            and not rule.limits
        ):
            return rule
    return None


def _index(rules: list[Rule]) -> dict[tuple[str, str], dict[str, list[Rule]]]:
    """(action, object) -> user -> the rules that apply to that user, in file order; the
    key ``*`` holds the rules for everyone (for users the file never names)."""
    named: set[str] = set()
    for rule in rules:
        named.update(rule.users or ())
    index: dict[tuple[str, str], dict[str, list[Rule]]] = {}
    for rule in rules:
        for action in (rule.action,) if rule.action else ACTIONS:
            for obj in (rule.object,) if rule.object else OBJECTS:
                table = index.setdefault((action, obj), {})
                for user in rule.users if rule.users is not None else (*named, EVERYONE):
                    table.setdefault(user, []).append(rule)
    return index


def _matches(pattern: str, value: str) -> bool:
    if pattern.endswith("*"):
        return value.startswith(pattern[:-1])
    return pattern == value


def _substitute(pattern: str, user: str) -> str:
    if "${" not in pattern:
        return pattern
    name, _, domain = user.partition("@")
    normal = user.replace("@", "_").replace(".", "_")
    return (
        pattern.replace("${userdomain}", normal)
        .replace("${user}", name.replace(".", "_"))
        .replace("${domain}", domain.replace(".", "_"))
    )


def _topic_matches(rule: Rule, pattern: str, user: str, key: str) -> bool:
    if any(word in key for word in SUBSTITUTIONS):
        return False  # a key may not smuggle in a substitution (qpidd)
    words = rule.topic if "${" not in pattern else None
    if words is None:
        words = topic_words(_substitute(pattern, user))
    return pattern_matches(words, topic_words(key))


class _Reader:
    """Reads a file's lines into an :class:`Acl`."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.line = 0
        self.groups: dict[str, frozenset[str]] = {}
        self.rules: list[Rule] = []
        self.host_rules: list[HostRule] = []
        self.connection_quotas: dict[str, int] = {}
        self.queue_quotas: dict[str, int] = {}

    def read(self, text: str) -> Acl:
        for number, line in _logical_lines(text, self._fail_at):
            self.line = number
            self._line(line)
        return Acl(
            self.source,
            self.rules,
            self.host_rules,
            self.groups,
            self.connection_quotas,
            self.queue_quotas,
        )

    def _fail_at(self, number: int, why: str) -> AclError:
        return AclError(f"ACL file {self.source}, line {number}: {why}")

    def _fail(self, why: str) -> AclError:
        return self._fail_at(self.line, why)

    def _line(self, line: str) -> None:
        tokens = line.split()
        keyword = tokens[0].lower()
        if keyword == "group":
            self._group(tokens)
        elif keyword == "acl":
            self._acl(tokens, line)
        elif keyword == "quota":
            self._quota(tokens)
        else:
            raise self._fail(f"a line starts with 'group', 'acl' or 'quota', not {tokens[0]!r}")

    def _group(self, tokens: list[str]) -> None:
        if len(tokens) < 3:
            raise self._fail("a group line needs a name and at least one member")
        name = tokens[1]
        if not GROUP_NAME.fullmatch(name) or name.lower() == ALL:
            raise self._fail(f"{name!r} cannot be a group name (letters, digits, - and _)")
        if name in self.groups:
            raise self._fail(f"group {name!r} is defined twice")
        members: set[str] = set()
        for member in tokens[2:]:
            if member == name:
                continue  # qpidd ignores a group naming itself
            if member in self.groups:
                members |= self.groups[member]
            elif USER_NAME.fullmatch(member):
                members.add(user_key(member))
            else:
                raise self._fail(f"{member!r} is not a user or group name")
        self.groups[name] = frozenset(members)

    def _users(self, name: str) -> frozenset[str] | None:
        if name.lower() == ALL:
            return None
        if name in self.groups:
            return self.groups[name]
        if not USER_NAME.fullmatch(name) and "=" not in name:
            raise self._fail(f"{name!r} is not a user or group name")
        return frozenset({user_key(name)})

    def _acl(self, tokens: list[str], text: str) -> None:
        if len(tokens) < 4:
            raise self._fail("an acl line needs a permission, a user or group, and an action")
        permission = tokens[1].lower()
        if permission not in PERMISSIONS:
            raise self._fail(f"unknown permission {tokens[1]!r} (one of {', '.join(PERMISSIONS)})")
        allows, logs = PERMISSIONS[permission]
        users = self._users(tokens[2])
        action = self._keyword(tokens[3], ACTIONS, "action")
        if action is None and users is None and len(tokens) > 4:
            raise self._fail("nothing may follow 'acl ... all all'")
        obj = self._keyword(tokens[4], OBJECTS, "object") if len(tokens) > 4 else None
        properties = [self._property(token) for token in tokens[5:]]
        if action == "create" and obj == "connection":
            self.host_rules.append(self._host_rule(text, allows, logs, users, dict(properties)))
            return
        text_props = tuple((k, v) for k, v in properties if k in TEXT_PROPERTIES)
        limits = tuple(
            Limit(*LIMIT_PROPERTIES[k], int(v)) for k, v in properties if k in LIMIT_PROPERTIES
        )
        keys = dict(text_props)
        topic = topic_words(keys["routingkey"]) if "routingkey" in keys else None
        self.rules.append(
            Rule(
                self.line, text.strip(), allows, logs, users, action, obj, text_props, limits, topic
            )
        )

    def _keyword(self, token: str, allowed: tuple[str, ...], what: str) -> str | None:
        word = token.lower()
        if word == ALL:
            return None
        if word not in allowed:
            raise self._fail(f"unknown {what} {token!r} (one of {', '.join(allowed)}, or all)")
        return word

    def _property(self, token: str) -> tuple[str, str]:
        name, equals, value = token.partition("=")
        if not equals or not value:
            raise self._fail(f"a property is written name=value, not {token!r}")
        key = name.lower()
        if key not in TEXT_PROPERTIES and key not in LIMIT_PROPERTIES:
            known = ", ".join(sorted(TEXT_PROPERTIES | set(LIMIT_PROPERTIES)))
            raise self._fail(f"unknown property {name!r} (one of {known})")
        if key in LIMIT_PROPERTIES and not (value.isascii() and value.isdigit()):
            raise self._fail(f"{name} must be a whole number of 0 or more, not {value!r}")
        if key == "policytype" and value not in POLICY_TYPES:
            raise self._fail(f"policytype must be one of {', '.join(POLICY_TYPES)}, not {value!r}")
        return key, value

    def _host_rule(
        self,
        text: str,
        allows: bool,
        logs: bool,
        users: frozenset[str] | None,
        properties: dict[str, str],
    ) -> HostRule:
        if "name" in properties:
            raise self._fail("a 'create connection' rule has no name= (it takes host=)")
        host = properties.get("host")
        if host is None:
            raise self._fail("a 'create connection' rule needs host= (an address, a range, all)")
        if (
            users is None
            and host == ALL
            and any(r.users is None and r.first is None for r in self.host_rules)
        ):
            raise self._fail("only one 'create connection host=all' rule for all users")
        first, last = (None, None) if host == ALL else self._range(host)
        return HostRule(self.line, text.strip(), allows, logs, users, first, last)

    def _range(
        self, host: str
    ) -> tuple[
        ipaddress.IPv4Address | ipaddress.IPv6Address, ipaddress.IPv4Address | ipaddress.IPv6Address
    ]:
        try:
            ends = [ipaddress.ip_address(part) for part in host.split(",")]
        except ValueError:
            raise self._fail(f"host={host} is not an address, a first,last range or all") from None
        if len(ends) > 2 or ends[0].version != ends[-1].version or ends[0] > ends[-1]:  # type: ignore[operator]
            raise self._fail(f"host={host} is not an address, a first,last range or all")
        return ends[0], ends[-1]

    def _quota(self, tokens: list[str]) -> None:
        if len(tokens) < 4:
            raise self._fail("a quota line needs connections or queues, a number and names")
        kind = tokens[1].lower()
        quotas = {"connections": self.connection_quotas, "queues": self.queue_quotas}.get(kind)
        if quotas is None:
            raise self._fail(f"a quota is for connections or queues, not {tokens[1]!r}")
        value = tokens[2]
        if not (value.isascii() and value.isdigit()) or int(value) > MAX_QUOTA:
            raise self._fail(f"a quota is a whole number from 0 to {MAX_QUOTA}, not {value!r}")
        for name in tokens[3:]:
            users = self._users(name)
            for user in users if users is not None else (ALL,):
                quotas[user] = int(value)


def _logical_lines(text: str, fail: Callable[[int, str], AclError]) -> Iterator[tuple[int, str]]:
    """(number of the first physical line, text) for each line that says something, with
    ``\\`` continuations joined."""
    pending: list[str] = []
    start = 0
    number = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = number
        if line.endswith("\\"):
            pending.append(line[:-1])
            continue
        pending.append(line)
        joined = " ".join(pending).strip()
        pending = []
        if joined:
            yield start, joined
    if pending:
        raise fail(number, "the file ends inside a continued line")
