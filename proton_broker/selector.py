"""JMS message selectors: the SQL-92 subset of JMS 2.0 (javax.jms.Message, "Message
Selectors"), parsed once and evaluated against every message a consumer might take.

The rules this module owns:

- A selector is compiled once, at attach, into a tree of small closures, so that the
  broker thread pays per message only for the identifiers the selector names, looked up
  afresh each time. A syntax error is refused then, as ``InvalidField(..., "filter")``,
  naming the selector and the position; a selector that compiles never raises afterwards,
  whatever a message carries, because the one broker thread evaluates it on every message.
- Three-valued logic, as the JMS tables: a condition is TRUE, FALSE or UNKNOWN (``None``
  here), and a message matches only when it is TRUE. A missing identifier is NULL;
  arithmetic and comparisons with NULL, division by zero and LIKE on a non-string are
  UNKNOWN, not errors. A comparison of two values of different types (a string with a
  number, a boolean with a number), ``<>`` included, and the ordering of strings or
  booleans are FALSE, as the JMS specification says and qpidd's ``SelectorValue`` does
  (Broker-J agrees except that its ``<>`` is the negation of ``=``, so TRUE there).
- Values are only NULL, booleans, numbers (int and float, compared across each other) and
  strings. A property of any other type (binary, list, map, described, uuid, decimal) is
  NULL; symbols and chars are strings, unsigned and small integers are numbers.
- Comparisons do not chain ("a = b = c" is refused, as the JMS grammar has it), and kinds
  are checked where the text alone shows them: "a + 'x'", "a LIKE 5", "1 AND 2" are
  refused at attach rather than being UNKNOWN on every message.
- The identifiers in ``_RECORD_FIELDS`` and ``_HEADERS`` (below) read the message's
  header and properties the way Qpid JMS maps them onto AMQP (as Broker-J evaluates them);
  every other identifier is the application property of that name. Fields the broker's
  record does not keep (correlation-id, user-id, reply-to, group-sequence) are decoded
  from the message on demand, so only selectors that name them pay for them.
"""

from __future__ import annotations

import operator
import re
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from proton_broker.errors import InvalidField
from proton_broker.exchanges.topic import pattern_matches, words
from proton_broker.message import Message

# A compiled expression: message -> None (NULL / UNKNOWN), bool, int, float or str.
Evaluate = Callable[[Message], Any]

_KEYWORDS = frozenset(
    ("NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE")
)
_COMPARISONS = frozenset(("=", "<>", "<", "<=", ">", ">="))
# The deepest expression tree accepted: evaluation recurses once per level, on a broker
# thread whose stack is already in use; no sensible selector comes near it.
_MAX_DEPTH = 100
_MAX_PARENTHESES = 32  # parsing recurses through eight functions per parenthesis

# Static kinds, so that what can never make sense ("a + 'x'", "a LIKE 5", "1 AND 2") is
# refused at attach rather than being silently UNKNOWN on every message.
BOOL, NUM, STR, ANY = "a condition", "a number", "a string", "a value"


class Selector:
    """A compiled selector; :meth:`matches` is True only when it evaluates to TRUE."""

    __slots__ = ("text", "_evaluate")

    def __init__(self, text: str, evaluate: Evaluate | None) -> None:
        self.text = text
        self._evaluate = evaluate

    def matches(self, message: Message) -> bool:
        """Whether ``message`` is selected (FALSE and UNKNOWN are not). Never raises: a
        failure reading the message (a paged-out or damaged one) reads as no match."""
        evaluate = self._evaluate
        if evaluate is None:
            return True
        try:
            return evaluate(message) is True
        except Exception:  # a broker thread runs this on every message: no escape
            return False

    def __repr__(self) -> str:
        return f"Selector({self.text!r})"


def with_subject(pattern: str, selector: Selector | None) -> Selector:
    """A consumer's filter on the message's subject (qpidd's subject filter on a queue:
    a ``queue/subject`` address, the legacy binding filters), ``pattern`` matched as a
    topic binding key (``*`` one word, ``#`` any number), and ``selector`` too if given."""
    wanted = words(pattern)

    def evaluate(message: Message) -> bool:
        subject = message.subject or ""
        if subject != pattern and not pattern_matches(wanted, words(subject)):
            return False
        return selector is None or selector.matches(message)

    text = f"subject {pattern!r}" + (f" and ({selector.text})" if selector is not None else "")
    return Selector(text, evaluate)


def parse_selector(text: str) -> Selector:
    """Compile ``text``; an empty or blank selector selects every message (JMS).

    Raises ``InvalidField(description, "filter")`` for any syntax error, the description
    naming the selector, the problem and its position (0-based, in characters).
    """
    if not text.strip():
        return Selector(text, None)
    try:
        parser = _Parser(_tokens(text))
        expression = parser.selector()
    except _SyntaxError as exc:
        raise InvalidField(
            f'invalid selector "{text}": {exc.problem} at position {exc.pos}', "filter"
        ) from None
    except RecursionError:
        raise InvalidField(f'invalid selector "{text}": nested too deeply', "filter") from None
    return Selector(text, expression.evaluate)


# ---- tokens ------------------------------------------------------------------------------


class _SyntaxError(Exception):
    def __init__(self, problem: str, pos: int) -> None:
        super().__init__(problem)
        self.problem, self.pos = problem, pos


class _Token(NamedTuple):
    kind: str  # "str", "num", "ident", "kw", "op" or "end"
    value: Any  # the string, the number, the name, the keyword upper-cased, the operator
    pos: int

    def describe(self) -> str:
        if self.kind == "end":
            return "end of selector"
        if self.kind == "str":
            return "string '" + str(self.value).replace("'", "''") + "'"
        if self.kind == "ident":
            return f"identifier {self.value}"
        return str(self.value) if self.kind != "op" else f"'{self.value}'"


_NUMBER = re.compile(r"([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)([eE][+-]?[0-9]+)?")
# Exact literals as both Qpid brokers read them: hexadecimal (0x1F), octal (a leading 0:
# 010 is 8) or decimal, each with an optional long suffix (1L).
_EXACT = re.compile(r"0[xX]([0-9a-fA-F]+)[lL]?|([0-9]+)[lL]")
_OPERATORS = ("<>", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "(", ")", ",")


def _tokens(text: str) -> list[_Token]:
    """Split ``text`` into tokens, ending with an "end" token."""
    tokens: list[_Token] = []
    pos, end = 0, len(text)
    while pos < end:
        char = text[pos]
        if char.isspace():
            pos += 1
        elif char == "'":
            pos = _string(text, pos, tokens)
        elif char == '"':  # a quoted identifier (Broker-J's and qpidd's)
            pos = _string(text, pos, tokens, quote='"', kind="ident")
        elif char.isdigit() or (char == "." and text[pos + 1 : pos + 2].isdigit()):
            pos = _number(text, pos, tokens)
        elif char.isalpha() or char in "_$":
            pos = _word(text, pos, tokens)
        else:
            for op in _OPERATORS:
                if text.startswith(op, pos):
                    tokens.append(_Token("op", op, pos))
                    pos += len(op)
                    break
            else:
                raise _SyntaxError(f"unexpected character {char!r}", pos)
    tokens.append(_Token("end", None, end))
    return tokens


def _word(text: str, pos: int, tokens: list[_Token]) -> int:
    """Read the keyword or identifier at ``pos``; return the offset after it."""
    stop, end = pos + 1, len(text)
    while stop < end and (text[stop].isalnum() or text[stop] in "_$"):
        stop += 1
    word = text[pos:stop]
    if word.upper() in _KEYWORDS:
        tokens.append(_Token("kw", word.upper(), pos))
    else:
        tokens.append(_Token("ident", word, pos))
    return stop


def _string(text: str, pos: int, tokens: list[_Token], quote: str = "'", kind: str = "str") -> int:
    """Read the quoted string (or quoted identifier) at ``pos``, a doubled quote standing
    for one; return the offset after it."""
    parts, at = [], pos + 1
    while True:
        close = text.find(quote, at)
        if close < 0:
            raise _SyntaxError("unterminated string" if kind == "str" else "unterminated name", pos)
        parts.append(text[at:close])
        if not text.startswith(quote * 2, close):
            tokens.append(_Token(kind, quote.join(parts), pos))
            return close + 1
        at = close + 2


def _number(text: str, pos: int, tokens: list[_Token]) -> int:
    match = _EXACT.match(text, pos) or _NUMBER.match(text, pos)
    if match is None:  # a non-ASCII digit
        raise _SyntaxError("malformed number", pos)
    stop = match.end()
    if stop < len(text) and (text[stop].isalnum() or text[stop] in "_$."):
        raise _SyntaxError("malformed number", pos)
    tokens.append(_Token("num", _numeric_value(match, pos), pos))
    return stop


def _numeric_value(match: re.Match[str], pos: int) -> int | float:
    """The value of a number literal: hexadecimal, octal (a leading 0), decimal or
    floating point."""
    literal = match.group()
    if match.re is _EXACT:
        hexadecimal, digits = match.groups()
        if hexadecimal is not None:
            return int(hexadecimal, 16)
        literal = digits
    elif match.group(2) is not None or "." in literal:
        return float(literal)
    if len(literal) > 1 and literal.startswith("0"):
        if not set(literal) <= set("01234567"):
            raise _SyntaxError("malformed octal number", pos)
        return int(literal, 8)
    return int(literal)


# ---- parsing into closures ---------------------------------------------------------------


class _Expr(NamedTuple):
    evaluate: Evaluate
    kind: str  # BOOL, NUM, STR or ANY (an identifier or NULL: known only per message)
    pos: int  # where it starts in the text
    depth: int
    literal: tuple[Any] | None = None  # (its value,) when it is a literal


def _literal(value: Any, kind: str, pos: int) -> _Expr:
    return _Expr(lambda message: value, kind, pos, 1, (value,))


class _Parser:
    """Recursive descent over the JMS grammar, lowest precedence first:
    OR, AND, NOT, predicates (comparison, BETWEEN, LIKE, IN, IS NULL), + -, * /, unary."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens, self.at = tokens, 0
        self.nesting = 0  # parentheses open here

    # -- token helpers --

    def peek(self) -> _Token:
        return self.tokens[self.at]

    def take(self) -> _Token:
        token = self.tokens[self.at]
        self.at += 1
        return token

    def accept(self, kind: str, value: Any) -> bool:
        token = self.tokens[self.at]
        if token.kind == kind and token.value == value:
            self.at += 1
            return True
        return False

    def expect(self, kind: str, value: Any, what: str) -> None:
        if not self.accept(kind, value):
            token = self.peek()
            raise _SyntaxError(f"expected {what}, found {token.describe()}", token.pos)

    # -- grammar --

    def selector(self) -> _Expr:
        expression = _check(self.condition(), BOOL)
        token = self.peek()
        if token.kind != "end":
            raise _SyntaxError(f"unexpected {token.describe()}", token.pos)
        return expression

    def condition(self) -> _Expr:
        """OR of ANDs, each flattened into one node so long chains stay shallow."""
        terms = [self.conjunction()]
        while self.accept("kw", "OR"):
            terms.append(self.conjunction())
        return terms[0] if len(terms) == 1 else _junction(_or, terms)

    def conjunction(self) -> _Expr:
        terms = [self.negation()]
        while self.accept("kw", "AND"):
            terms.append(self.negation())
        return terms[0] if len(terms) == 1 else _junction(_and, terms)

    def negation(self) -> _Expr:
        pos = self.peek().pos
        if self.accept("kw", "NOT"):
            operand = _check(self.negation(), BOOL)
            return _node(_unary(_not, operand.evaluate), BOOL, pos, operand)
        return self.predicate()

    def predicate(self) -> _Expr:
        left = self.sum()
        token = self.peek()
        if token.kind == "op" and token.value in _COMPARISONS:
            self.take()
            right = self.sum()
            after = self.peek()
            if after.kind == "op" and after.value in _COMPARISONS:
                raise _SyntaxError(
                    f"comparisons do not chain (join them with AND), found {after.describe()}",
                    after.pos,
                )
            return _node(
                _comparison(_COMPARE[token.value], left, right), BOOL, left.pos, left, right
            )
        return self.keyword_predicate(left) if token.kind == "kw" else left

    def keyword_predicate(self, left: _Expr) -> _Expr:
        """``left`` IS [NOT] NULL, or [NOT] BETWEEN, LIKE or IN; else ``left`` alone."""
        token = self.peek()
        if token.value == "IS":
            self.take()
            negated = self.accept("kw", "NOT")
            self.expect("kw", "NULL", "NULL after IS" + (" NOT" if negated else ""))
            return _node(_is_null(left.evaluate, negated), BOOL, left.pos, left)
        negated = token.value == "NOT" and self.tokens[self.at + 1].kind == "kw"
        if negated:
            self.take()
        keyword = self.peek()
        if keyword.kind == "kw" and keyword.value in ("BETWEEN", "LIKE", "IN"):
            self.take()
            parse = {"BETWEEN": self.between, "LIKE": self.like, "IN": self.in_list}
            expression = parse[keyword.value](left)
            if not negated:
                return expression
            return _node(_unary(_not, expression.evaluate), BOOL, left.pos, expression)
        if negated:
            raise _SyntaxError(
                f"expected BETWEEN, LIKE or IN after NOT, found {keyword.describe()}", keyword.pos
            )
        return left

    def between(self, left: _Expr) -> _Expr:
        _check(left, NUM)
        low = _check(self.sum(), NUM)
        self.expect("kw", "AND", "AND in BETWEEN")
        high = _check(self.sum(), NUM)
        return _node(
            _between(left.evaluate, low.evaluate, high.evaluate), BOOL, left.pos, left, low, high
        )

    def like(self, left: _Expr) -> _Expr:
        _check(left, STR)
        pattern = self.take()
        if pattern.kind != "str":
            raise _SyntaxError(
                f"expected a string pattern after LIKE, found {pattern.describe()}", pattern.pos
            )
        escape = None
        if self.accept("kw", "ESCAPE"):
            token = self.take()
            if token.kind != "str" or len(token.value) != 1:
                raise _SyntaxError(
                    f"expected one character in quotes after ESCAPE, found {token.describe()}",
                    token.pos,
                )
            escape = token.value
        like = _LikePattern(pattern.value, escape, pattern.pos)
        return _node(_like(left.evaluate, like), BOOL, left.pos, left)

    def in_list(self, left: _Expr) -> _Expr:
        _check(left, STR, NUM)
        self.expect("op", "(", "'(' after IN")
        items = [self.in_item()]
        while self.accept("op", ","):
            items.append(self.in_item())
        self.expect("op", ")", "',' or ')' in the IN list")
        return _node(_in(left.evaluate, items), BOOL, left.pos, left)

    def in_item(self) -> Any:
        token = self.take()
        sign = 1
        if token.kind == "op" and token.value in "+-":
            sign = -1 if token.value == "-" else 1
            token = self.take()
            if token.kind != "num":
                raise _SyntaxError(f"expected a number, found {token.describe()}", token.pos)
        if token.kind == "str":
            return token.value
        if token.kind == "num":
            return sign * token.value
        raise _SyntaxError(
            f"expected a string or number in the IN list, found {token.describe()}", token.pos
        )

    def sum(self) -> _Expr:
        left = self.product()
        while self.peek().kind == "op" and self.peek().value in "+-":
            op = _ADD if self.take().value == "+" else _SUBTRACT
            _check(left, NUM)
            right = _check(self.product(), NUM)
            left = _node(_binary(op, left.evaluate, right.evaluate), NUM, left.pos, left, right)
        return left

    def product(self) -> _Expr:
        left = self.unary()
        while self.peek().kind == "op" and self.peek().value in "*/":
            op = _MULTIPLY if self.take().value == "*" else _divide
            _check(left, NUM)
            right = _check(self.unary(), NUM)
            left = _node(_binary(op, left.evaluate, right.evaluate), NUM, left.pos, left, right)
        return left

    def unary(self) -> _Expr:
        token = self.peek()
        if token.kind == "op" and token.value in "+-":
            self.take()
            operand = _check(self.unary(), NUM)
            literal = self.tokens[self.at - 1]
            if (
                token.value == "-"
                and literal.kind == "num"
                and operand.kind == NUM
                and literal.pos == operand.pos
            ):  # a negative literal: fold it
                return _literal(-literal.value, NUM, token.pos)
            op = _negate if token.value == "-" else _plus
            return _node(_unary(op, operand.evaluate), NUM, token.pos, operand)
        return self.primary()

    def primary(self) -> _Expr:
        token = self.take()
        if token.kind == "op" and token.value == "(":
            self.nesting += 1
            if self.nesting > _MAX_PARENTHESES:
                raise _SyntaxError("parentheses nested too deeply", token.pos)
            inner = self.condition()
            self.expect("op", ")", "')'")
            self.nesting -= 1
            return inner._replace(pos=token.pos)
        if token.kind == "ident":
            return _Expr(_identifier(token.value), ANY, token.pos, 1)
        if token.kind in ("num", "str"):
            return _literal(token.value, NUM if token.kind == "num" else STR, token.pos)
        if token.kind == "kw" and token.value in ("TRUE", "FALSE"):
            return _literal(token.value == "TRUE", BOOL, token.pos)
        if token.kind == "kw" and token.value == "NULL":
            return _literal(None, ANY, token.pos)
        if token.kind == "kw":
            raise _SyntaxError(
                f"expected a value, found the reserved word {token.value}", token.pos
            )
        if token.kind == "end":
            raise _SyntaxError("expected a value", token.pos)
        raise _SyntaxError(f"expected a value, found {token.describe()}", token.pos)


def _check(expression: _Expr, *kinds: str) -> _Expr:
    """``expression``, if it may be of one of ``kinds`` (an identifier may be anything)."""
    if expression.kind == ANY or expression.kind in kinds:
        return expression
    raise _SyntaxError(f"expected {' or '.join(kinds)}, found {expression.kind}", expression.pos)


def _node(evaluate: Evaluate, kind: str, pos: int, *children: _Expr) -> _Expr:
    depth = 1 + max(child.depth for child in children)
    if depth > _MAX_DEPTH:
        raise _SyntaxError("nested too deeply", pos)
    return _Expr(evaluate, kind, pos, depth)


def _junction(combine: Callable[[list[Evaluate]], Evaluate], terms: list[_Expr]) -> _Expr:
    for term in terms:
        _check(term, BOOL)
    return _node(combine([term.evaluate for term in terms]), BOOL, terms[0].pos, *terms)


# ---- three-valued logic ------------------------------------------------------------------
# A condition's value is True, False or None (UNKNOWN); any other value (a number, a
# string, or a boolean property's absence) used as a condition is UNKNOWN.


def _and(terms: list[Evaluate]) -> Evaluate:
    def evaluate(message: Message) -> bool | None:
        result: bool | None = True
        for term in terms:
            value = term(message)
            if value is False:
                return False
            if value is not True:
                result = None
        return result

    return evaluate


def _or(terms: list[Evaluate]) -> Evaluate:
    def evaluate(message: Message) -> bool | None:
        result: bool | None = False
        for term in terms:
            value = term(message)
            if value is True:
                return True
            if value is not False:
                result = None
        return result

    return evaluate


def _not(value: Any) -> bool | None:
    if value is True:
        return False
    return True if value is False else None


def _unary(op: Callable[[Any], Any], operand: Evaluate) -> Evaluate:
    return lambda message: op(operand(message))


def _binary(op: Callable[[Any, Any], Any], left: Evaluate, right: Evaluate) -> Evaluate:
    return lambda message: op(left(message), right(message))


# ---- comparison and arithmetic -----------------------------------------------------------


def _is_number(value: Any) -> bool:
    # Values are normalised (see _sql_value), so bool is never taken for an int here.
    kind = type(value)
    return kind is int or kind is float


def _equality(negated: bool) -> Callable[[Any, Any], bool | None]:
    def compare(left: Any, right: Any) -> bool | None:
        if left is None or right is None:
            return None
        kind, other = type(left), type(right)
        if kind is other or ((kind is int or kind is float) and (other is int or other is float)):
            return bool(left != right) if negated else bool(left == right)
        return False  # different types: FALSE, for "<>" too (JMS; qpidd's SelectorValue)

    return compare


def _ordering(op: Callable[[Any, Any], bool]) -> Callable[[Any, Any], bool | None]:
    def compare(left: Any, right: Any) -> bool | None:
        kind, other = type(left), type(right)
        if (kind is int or kind is float) and (other is int or other is float):
            return op(left, right)
        if left is None or right is None:
            return None  # NULL: UNKNOWN
        return False  # strings, booleans, mixed types: FALSE (qpidd's SelectorValue)

    return compare


def _comparison(compare: Callable[[Any, Any], bool | None], left: _Expr, right: _Expr) -> Evaluate:
    """``left <op> right``; against a literal (the usual shape) one call fewer."""
    first, second = left.evaluate, right.evaluate
    if right.literal is not None:
        value = right.literal[0]
        return lambda message: compare(first(message), value)
    return lambda message: compare(first(message), second(message))


_COMPARE = {
    "=": _equality(False),
    "<>": _equality(True),
    "<": _ordering(operator.lt),
    "<=": _ordering(operator.le),
    ">": _ordering(operator.gt),
    ">=": _ordering(operator.ge),
}


def _arithmetic(op: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def apply(left: Any, right: Any) -> Any:
        if not (_is_number(left) and _is_number(right)):
            return None
        try:
            return op(left, right)
        except OverflowError:  # an integer too large to meet a float
            return None

    return apply


def _divide(left: Any, right: Any) -> Any:
    """Java's division: integers truncate toward zero; by zero is UNKNOWN, not an error."""
    if not (_is_number(left) and _is_number(right)) or right == 0:
        return None
    try:
        if type(left) is int and type(right) is int:
            quotient = abs(left) // abs(right)
            return quotient if (left < 0) == (right < 0) else -quotient
        return left / right
    except OverflowError:
        return None


_ADD, _SUBTRACT, _MULTIPLY = (
    _arithmetic(operator.add),
    _arithmetic(operator.sub),
    _arithmetic(operator.mul),
)


def _negate(value: Any) -> Any:
    return -value if _is_number(value) else None


def _plus(value: Any) -> Any:
    return value if _is_number(value) else None


def _between(value: Evaluate, low: Evaluate, high: Evaluate) -> Evaluate:
    """``low <= value AND value <= high``, with the AND's UNKNOWN rules."""
    at_least, at_most = _COMPARE["<="], _COMPARE["<="]

    def evaluate(message: Message) -> bool | None:
        v = value(message)
        above = at_least(low(message), v)
        if above is False:
            return False
        below = at_most(v, high(message))
        if below is False:
            return False
        return True if above is True and below is True else None

    return evaluate


def _is_null(value: Evaluate, negated: bool) -> Evaluate:
    if negated:
        return lambda message: value(message) is not None
    return lambda message: value(message) is None


def _in(value: Evaluate, items: list[Any]) -> Evaluate:
    """``value IN (items)``, as the OR of ``value = item``: UNKNOWN when the value is NULL,
    else TRUE on a match and FALSE otherwise (an item of another type is not equal)."""
    strings = frozenset(item for item in items if isinstance(item, str))
    numbers = frozenset(item for item in items if not isinstance(item, str))

    def evaluate(message: Message) -> bool | None:
        v = value(message)
        if type(v) is str:
            return v in strings
        if _is_number(v):
            return v in numbers
        return None if v is None else False  # NULL: UNKNOWN; a boolean is in no list

    return evaluate


class _Piece(NamedTuple):
    """A run of a LIKE pattern between two ``%``: fixed ``length`` characters, a literal
    (``text``) or, where it holds ``_``, a regular expression without repetition (``rx``)."""

    length: int
    text: str | None
    rx: re.Pattern[str] | None

    def at(self, s: str, pos: int) -> bool:
        """Whether the piece matches ``s`` at ``pos`` exactly."""
        if self.text is not None:
            return s.startswith(self.text, pos)
        assert self.rx is not None
        return self.rx.fullmatch(s, pos, pos + self.length) is not None

    def find(self, s: str, pos: int, end: int) -> int:
        """The first place from ``pos`` where the piece matches, ending by ``end``; -1."""
        if self.text is not None:
            return s.find(self.text, pos, end)
        assert self.rx is not None
        found = self.rx.search(s, pos, end)
        return -1 if found is None else found.start()


class _LikePattern:
    """A LIKE pattern, matched in linear time, never by a backtracking regular expression:
    ``%`` any run, ``_`` one character, the escape character makes the next one literal.
    The runs between ``%`` must appear in order; each is placed at its first possible
    place, which is right for a pattern whose only repetition is ``%`` (a selector such as
    ``p LIKE '%a%a%a%a%b'`` took ``re.fullmatch`` minutes on one message, on the loop
    that serves every client; qpidd's POSIX ``regexec`` is linear too)."""

    def __init__(self, pattern: str, escape: str | None, pos: int) -> None:
        runs: list[list[str | None]] = [[]]  # None: the one-character wildcard
        index = 0
        while index < len(pattern):
            char = pattern[index]
            if char == escape:
                index += 1
                if index == len(pattern):
                    raise _SyntaxError("the LIKE pattern ends with its ESCAPE character", pos)
                runs[-1].append(pattern[index])
            elif char == "%":
                runs.append([])
            else:
                runs[-1].append(None if char == "_" else char)
            index += 1
        self.pieces = [_piece(run) for run in runs]

    def matches(self, s: str) -> bool:
        first, *middle = self.pieces
        if not middle:  # no %: the whole string
            return len(s) == first.length and first.at(s, 0)
        *middle, last = middle
        end = len(s) - last.length
        if end < first.length or not first.at(s, 0) or not last.at(s, end):
            return False
        pos = first.length
        for piece in middle:
            found = piece.find(s, pos, end)
            if found < 0:
                return False
            pos = found + piece.length
        return True


def _piece(run: list[str | None]) -> _Piece:
    if None not in run:
        return _Piece(len(run), "".join(run), None)  # type: ignore[arg-type]
    text = "".join("." if c is None else re.escape(c) for c in run)
    return _Piece(len(run), None, re.compile(text, re.DOTALL))


def _like(value: Evaluate, pattern: _LikePattern) -> Evaluate:
    matches = pattern.matches

    def evaluate(message: Message) -> bool | None:
        v = value(message)
        return matches(v) if type(v) is str else None

    return evaluate


# ---- identifiers -------------------------------------------------------------------------


def _sql_value(value: Any) -> Any:
    """A message value as the selector sees it: None, bool, int, float or str (subclasses
    such as symbols and unsigned integers made plain); anything else is NULL."""
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return None


def _id_text(value: Any) -> str | None:
    """A message-id or correlation-id as text: a string as it is, others as their str()."""
    if value is None:
        return None
    return str(value)


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str) else None


def _user_id(message: Message) -> str | None:
    value = message.properties_field(1)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _text(value)


def _jms_type(message: Message) -> str | None:
    annotated = message.message_annotation("x-opt-jms-type")
    return _text(annotated) if annotated is not None else message.subject


# Qpid JMS's mapping of the JMS header fields and JMSX properties onto AMQP. First those
# the record keeps, already of the selector's types (the codec made them so) ...
_RECORD_FIELDS: dict[str, Evaluate] = {
    "JMSMessageID": lambda message: _id_text(message.message_id),
    "JMSPriority": lambda message: message.priority,
    "JMSDeliveryMode": lambda message: "PERSISTENT" if message.durable else "NON_PERSISTENT",
    "JMSTimestamp": lambda message: message.creation_time or 0,
    "JMSExpiration": lambda message: _expiration(message),
    "JMSDestination": lambda message: message.to,
    "JMSRedelivered": lambda message: message.delivery_count > 0,
    "JMSXGroupID": lambda message: message.group_id,
    "JMSXDeliveryCount": lambda message: message.delivery_count + 1,
}
# ... then those read from the message's bytes on demand.
_HEADERS: dict[str, Evaluate] = {
    "JMSCorrelationID": lambda message: _id_text(message.properties_field(5)),
    "JMSType": _jms_type,
    "JMSReplyTo": lambda message: _text(message.properties_field(4)),
    "JMSXGroupSeq": lambda message: message.properties_field(11),
    "JMSXUserID": _user_id,
}


def _expiration(message: Message) -> int:
    """When the broker expires ``message``, in milliseconds since the epoch (its arrival plus
    its ttl; 0: never), as Broker-J's ``getExpiration`` reads it: the broker expires by the
    ttl alone (queues/expiry.py), not by the producer's absolute-expiry-time. A
    transaction's message counts from its receipt, as its expiry does."""
    ttl = message.ttl
    if not ttl:
        return 0
    # a subscription selects before it enqueues
    arrival = message.received or message.arrival or time.time()
    return int(arrival * 1000) + ttl


def _identifier(name: str) -> Evaluate:
    """The lookup for identifier ``name``, run per message. Fields of the record are read
    as they are; anything read from the message's bytes is guarded, so that a failure to
    read them (a paged-out or damaged message) reads as NULL."""
    field = _RECORD_FIELDS.get(name)
    if field is not None:
        return field
    read = _HEADERS.get(name)
    if read is not None:

        def evaluate(message: Message) -> Any:
            try:
                return _sql_value(read(message))
            except Exception:  # never raise on a message: unreadable is NULL
                return None

        return evaluate

    def application_property(message: Message) -> Any:
        try:
            value = message.application_property(name)
        except Exception:  # as above
            return None
        kind = type(value)
        if kind is str or kind is int or kind is float or kind is bool:
            return value
        return _sql_value(value)

    return application_property
