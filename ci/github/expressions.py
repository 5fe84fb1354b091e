"""A small three-valued evaluator for GitHub Actions ``if:`` expressions.

``evaluate(text, context)`` returns a value or :data:`UNKNOWN`; ``truth(text,
context)`` returns True, False or None (unknown). Only what a static reader can
know is known: literals, operators, ``github.event_name`` and whatever the
caller puts in ``context`` (dotted names -> values). Status functions assume the
happy path (``success()``/``always()`` true, ``failure()``/``cancelled()``
false); ``contains``/``startsWith``/``endsWith`` work on known arguments; every
other function and every unknown context name is UNKNOWN.

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

from ci.input_errors import InputError
from ci.numbers import whole_number

import functools

import json
import math
import re
from typing import Any, Callable, Mapping


class _Unknown:
    _instance = None

    def __new__(cls):
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
MISSING = object()   # a context name whose value is GitHub's null

_TOKEN_RE = re.compile(r"""
    (?P<ws>\s+)
  | (?P<str>'(?:[^']|'')*')
  | (?P<num>-?(?:0x[0-9a-fA-F]+|\d+(?:\.\d+)?(?:[eE][+-]?\d+)?))
  | (?P<op>&&|\|\||==|!=|<=|>=|[<>!()\[\].,*])
  | (?P<name>[A-Za-z_][A-Za-z0-9_-]*)
""", re.X)


class ExpressionError(InputError):
    """The text is not a GitHub expression this evaluator can parse."""


def strip_wrapper(text: str) -> str:
    text = text.strip()
    if text.startswith("${{") and text.endswith("}}") and text.count("${{") == 1:
        return text[3:-2].strip()
    return text


@functools.lru_cache(maxsize=4096)   # the same expressions are read once per matrix row
def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        match = _TOKEN_RE.match(text, pos)
        if not match:
            raise ExpressionError(f"cannot read {text[pos:pos + 20]!r} in expression {text!r}")
        pos = match.end()
        kind = match.lastgroup
        if kind != "ws":
            out.append((kind, match.group(kind)))
    return out


def _to_number(value: Any) -> float:
    if value is None or value is MISSING:
        return 0.0
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return 0.0
        try:
            return _hex(text) if text.lower().startswith("0x") else float(text)
        except ValueError:
            return math.nan
    return math.nan


def _hex(text: str) -> float:
    """A hexadecimal number (``0xff``); one past a float's range is infinite, as JavaScript reads it."""
    try:
        return float(int(text, 16))
    except OverflowError:
        return math.inf


def is_truthy(value: Any) -> bool | None:
    if value is UNKNOWN:
        return None
    if value is None or value is MISSING or value is False or value == "":
        return False
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return not (value == 0 or math.isnan(value))
    return True


def _equal(a: Any, b: Any) -> Any:
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    a = None if a is MISSING else a
    b = None if b is MISSING else b
    if isinstance(a, str) and isinstance(b, str):
        return a.lower() == b.lower()
    if type(a) is type(b) and not isinstance(a, (int, float)):
        return a == b
    if isinstance(a, (list, dict)) or isinstance(b, (list, dict)):
        return a is b
    return _to_number(a) == _to_number(b)


MAX_NESTING = 50   # parentheses, calls and ``!`` inside each other; deeper is an ExpressionError, not a crash
MAX_PATH_PARTS = 32   # ``a.b[c]...`` members of one context path searched for a known object


class _Parser:
    def __init__(self, text: str, context: Mapping[str, Any]):
        self.text = text
        self.toks = _tokens(text)
        self.i = 0
        self.ctx = context
        self.depth = 0

    def nested(self, parse: Callable[[], Any]) -> Any:
        """``parse()`` one level deeper: a crafted ``((((...`` or ``!!!!...`` stops at MAX_NESTING
        instead of exhausting Python's recursion."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExpressionError(f"expression nested deeper than {MAX_NESTING} levels: {self.text[:80]!r}...")
        try:
            return parse()
        finally:
            self.depth -= 1

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def take(self, value: str | None = None) -> tuple[str, str]:
        tok = self.peek()
        if tok is None or (value is not None and tok[1] != value):
            raise ExpressionError(f"expected {value or 'more'} in expression {self.text!r}")
        self.i += 1
        return tok

    def parse(self) -> Any:
        value = self.or_()
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()[1]!r} in expression {self.text!r}")
        return value

    def or_(self) -> Any:
        return self.nested(lambda: self._logical("||", self.and_, short_circuit=True))

    def and_(self) -> Any:
        return self._logical("&&", self.cmp, short_circuit=False)

    def _logical(self, op: str, operand: Callable[[], Any], *, short_circuit: bool) -> Any:
        """``a || b`` (short_circuit=True) or ``a && b`` (False), left to right, with GitHub's value
        semantics: a left side whose truth is ``short_circuit`` is the result, the other truth gives
        the right side; an unknown left side decides only where the right side's truth does."""
        left = operand()
        while self.peek() == ("op", op):
            self.take()
            right = operand()
            t = is_truthy(left)
            if t is short_circuit:
                continue
            if t is (not short_circuit):
                left = right
            else:
                left = short_circuit if is_truthy(right) is short_circuit else UNKNOWN
        return left

    def cmp(self) -> Any:
        left = self.unary()
        while self.peek() and self.peek()[1] in ("==", "!=", "<", "<=", ">", ">="):
            op = self.take()[1]
            right = self.unary()
            if op in ("==", "!="):
                eq = _equal(left, right)
                left = eq if eq is UNKNOWN or op == "==" else not eq
            elif left is UNKNOWN or right is UNKNOWN:
                left = UNKNOWN
            else:
                a, b = _to_number(left), _to_number(right)
                left = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[op]
        return left

    def unary(self) -> Any:
        if self.peek() == ("op", "!"):
            self.take()
            t = is_truthy(self.nested(self.unary))
            return UNKNOWN if t is None else not t
        return self.postfix()

    def postfix(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise ExpressionError(f"expression {self.text!r} ends too early")
        kind, text = tok
        if text == "(":
            self.take()
            value = self.or_()
            self.take(")")
            return self.members(value)
        self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return _hex(text) if "x" in text.lower() else float(text)
        if kind != "name":
            raise ExpressionError(f"unexpected {text!r} in expression {self.text!r}")
        low = text.lower()
        if low in ("true", "false"):
            return low == "true"
        if low == "null":
            return None
        if self.peek() == ("op", "("):
            return self.members(self.call(low))
        path, exact = [text], True
        while self.peek() and self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                nxt = self.take()
                if nxt[1] == "*":
                    exact = False
                path.append(nxt[1])
            else:
                index = self.or_()
                self.take("]")
                if isinstance(index, str):
                    path.append(index)
                else:
                    exact = False
        if not exact:
            return UNKNOWN
        return self.lookup(".".join(path))

    def members(self, value: Any) -> Any:
        """``.name`` and ``[index]`` applied to a computed value (``fromJson(x).arr``, ``(a || b)[k]``)."""
        while self.peek() and self.peek()[1] in (".", "["):
            if self.take()[1] == ".":
                key: Any = self.take()[1]
            else:
                key = self.or_()
                self.take("]")
            value = _member(value, key)
        return value

    def lookup(self, name: str) -> Any:
        lowered = name.lower()
        for key, value in self.ctx.items():
            if key.lower() == lowered:
                return value
        # a known object further up: matrix.config.case reads key "case" of matrix.config
        parts = name.split(".")
        if len(parts) > MAX_PATH_PARTS:   # no context is that deep: unknown, without a quadratic search
            return UNKNOWN
        for cut in range(len(parts) - 1, 1, -1):
            prefix = ".".join(parts[:cut]).lower()
            for key, value in self.ctx.items():
                if key.lower() == prefix and isinstance(value, dict):
                    for part in parts[cut:]:
                        value = _member(value, part)
                    return value
        # a prefix that the context declares as fully known (e.g. "inputs" on a schedule)
        head = name.split(".")[0]
        for key, value in self.ctx.items():
            if key.lower() == head.lower() + ".*":
                return value
        return UNKNOWN

    def call(self, name: str) -> Any:
        self.take("(")
        args = []
        if self.peek() != ("op", ")"):
            args.append(self.or_())
            while self.peek() == ("op", ","):
                self.take()
                args.append(self.or_())
        self.take(")")
        if name in ("success", "always"):
            return True
        if name in ("failure", "cancelled"):
            return False
        if name == "fromjson" and len(args) == 1:
            if not isinstance(args[0], str):
                return UNKNOWN
            try:
                return json.loads(args[0])
            except (ValueError, RecursionError):   # malformed, or nested past the decoder's recursion
                return UNKNOWN
        if name == "tojson" and len(args) == 1:
            return UNKNOWN if _has_unknown(args[0]) else json.dumps(args[0])
        if name == "format" and args and not any(a is UNKNOWN for a in args):
            def placeholder(m: re.Match) -> str:
                k = whole_number(m.group(1))
                return _as_text(args[k + 1]) if k is not None and k + 1 < len(args) else m.group(0)
            return re.sub(r"\{([0-9]+)\}", placeholder, str(args[0]))
        if name in ("contains", "startswith", "endswith") and len(args) == 2:
            hay, needle = args
            if hay is UNKNOWN or needle is UNKNOWN:
                return UNKNOWN
            if isinstance(hay, list):
                return any(_equal(x, needle) is True for x in hay)
            hay_s, needle_s = str(hay or "").lower(), str(needle or "").lower()
            return {"contains": needle_s in hay_s, "startswith": hay_s.startswith(needle_s),
                    "endswith": hay_s.endswith(needle_s)}[name]
        return UNKNOWN


def _member(value: Any, key: Any) -> Any:
    """value[key] as GitHub reads it: a missing key is null; anything unknown stays UNKNOWN."""
    if value is UNKNOWN or key is UNKNOWN:
        return UNKNOWN
    if isinstance(value, dict):
        if key == "*":
            return UNKNOWN
        return value.get(str(key))
    if isinstance(value, list) and isinstance(key, float) and key.is_integer() and 0 <= key < len(value):
        return value[int(key)]
    return None


def _has_unknown(value: Any) -> bool:
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(_has_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_unknown(v) for v in value)
    return False


def _as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def evaluate(text: Any, context: Mapping[str, Any] | None = None) -> Any:
    """The value of an expression (``${{ }}`` optional), or UNKNOWN."""
    if isinstance(text, bool):
        return text
    if text is None:
        return True
    if isinstance(text, (int, float)):
        return text
    body = strip_wrapper(str(text))
    if "${{" in body:   # text with embedded expressions: a non-empty string unless we know more
        return UNKNOWN
    return _Parser(body, context or {}).parse()


def syntax_error(body: str) -> str | None:
    """Why ``body`` (one expression, without ``${{ }}``) is not an expression GitHub can parse, or None.
    Read with nothing known, so only the grammar can fail; nesting past MAX_NESTING is this reader's
    limit, not GitHub's, and is never an answer."""
    try:
        _Parser(body, {}).parse()
    except ExpressionError as exc:
        return None if "nested deeper" in str(exc) else str(exc)
    return None


def embedded(text: str) -> tuple[list[str], bool]:
    """The bodies of the ``${{ ... }}`` in ``text``, read the way GitHub reads them (a ``}}`` inside a
    quoted string does not close one), and whether one is left open (GitHub refuses that too)."""
    out, start = [], text.find("${{")
    while start >= 0:
        i, quoted = start + 3, False
        while i < len(text):
            if text[i] == "'":
                quoted = not quoted   # '' inside a string: closes and reopens, the same as an escape
            elif not quoted and text.startswith("}}", i):
                break
            i += 1
        if i >= len(text):
            return out, True
        out.append(text[start + 3:i])
        start = text.find("${{", i + 2)
    return out, False


def truth(text: Any, context: Mapping[str, Any] | None = None) -> bool | None:
    """True / False / None (unknown) for a job or step ``if:`` (absent means True)."""
    if text is None:
        return True
    try:
        return is_truthy(evaluate(text, context))
    except ExpressionError:
        return None
