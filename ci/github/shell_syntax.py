"""Read a ``run:`` script (the bash subset CI uses) into a small syntax tree; docs/audit-shell.md §1.

Words keep their quoting (a piece is a literal, a ``$var``/``${...}``, a ``${{ ... }}`` expression
or a command substitution, each quoted or not), ``name=( ... )`` arrays span lines, and the
compound commands ``if``/``for``/``while``/``until``/``case``/``{ }``/``( )`` and ``f() { }`` are
nodes. Anything else is a simple command; the parser never raises (an unclosed ``if`` ends at
the end of the script). Evaluation lives in ci/github/shell_eval.py. Imports nothing from ``impl/``
or test code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_SCRIPT = 256 * 1024          # characters read of one script (a hostile workflow can be huge)
ARRAY_ASSIGN_RE = re.compile(r"^([A-Za-z_]\w*)(\+?)=$")
NAME_RE = re.compile(r"[A-Za-z_]\w*")
RESERVED_END = frozenset({"then", "fi", "do", "done", "elif", "else", "esac", "}"})


@dataclass(frozen=True)
class Piece:
    kind: str        # "lit" | "var" | "expr" | "sub" | "proc" (`<(...)`, `>(...)`)
    text: str        # lit: the text; var: what is inside ${ } (or the name); expr: the body; sub: raw source
    quoted: bool


@dataclass(frozen=True)
class Word:
    pieces: tuple[Piece, ...]
    raw: str

    @property
    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (a reserved word, an operator), else None."""
        if len(self.pieces) == 1 and self.pieces[0].kind == "lit" and not self.pieces[0].quoted:
            return self.pieces[0].text
        return None


@dataclass(frozen=True)
class Tok:
    kind: str                      # "word" | "op" | "array" | "redir"
    text: str                      # op / redir text; array: the variable name
    line: int
    word: Word | None = None
    items: tuple[Word, ...] = ()   # array elements
    append: bool = False           # ``name+=( ... )``
    glued: bool = False            # an op right after the same op, no blank between (``((``)


@dataclass
class Simple:
    words: list[Word]
    assigns: list[tuple[str, Word | tuple[Word, ...], bool]]   # (name, value or array items, append)
    line: int


@dataclass
class AndOr:
    items: list[tuple[str, list]]   # (operator before it: "" | "&&" | "||", pipeline: list of nodes)
    negate: list[bool]
    line: int
    background: bool = False        # ended by `&`


@dataclass
class If:
    clauses: list[tuple[list, list]]   # (condition statements, body statements)
    orelse: list | None
    line: int


@dataclass
class Loop:
    kind: str                      # "for" | "while" | "until"
    var: str
    items: list[Word] | None       # for: the words (None: "$@")
    cond: list
    body: list
    line: int


@dataclass
class Case:
    word: Word
    arms: list[tuple[list[Word], list]]
    line: int
    ends: list[str] = field(default_factory=list)   # per arm: ";;", ";&" (run the next body) or ";;&" (test on)


@dataclass
class Group:
    body: list
    subshell: bool
    line: int


@dataclass
class FuncDef:
    name: str
    body: list
    line: int


@dataclass
class Lexer:
    text: str
    i: int = 0
    line: int = 1
    toks: list[Tok] = field(default_factory=list)
    heredocs: list[tuple[str, bool]] = field(default_factory=list)


def _match_close(text: str, i: int, opener: str, closer: str) -> int:
    """Index just past the ``closer`` matching the ``opener`` at ``i`` (quotes skipped; end of text if none)."""
    depth, j, n = 0, i, len(text)
    while j < n:
        ch = text[j]
        if ch == "\\":
            j += 2
            continue
        if ch == "'" and opener != "{{":
            close = text.find("'", j + 1)
            j = n if close < 0 else close + 1
            continue
        if text.startswith(opener, j):
            depth += 1
            j += len(opener)
            continue
        if text.startswith(closer, j):
            depth -= 1
            j += len(closer)
            if depth == 0:
                return j
            continue
        j += 1
    return n


def _dollar(text: str, i: int, quoted: bool) -> tuple[Piece, int]:
    """The ``$...`` form at ``i`` and the index after it."""
    if text.startswith("${{", i):
        close = text.find("}}", i)
        end = len(text) if close < 0 else close + 2
        return Piece("expr", text[i + 3:end - 2].strip(), quoted), end
    if text.startswith("$((", i) or text.startswith("$(", i):
        end = _match_close(text, i + 1, "(", ")")
        return Piece("sub", text[i:end], quoted), end
    if text.startswith("${", i):
        end = _match_close(text, i + 1, "{", "}")
        return Piece("var", text[i + 2:end - 1], quoted), end
    nxt = text[i + 1:i + 2]
    if nxt and (nxt.isalpha() or nxt == "_"):
        m = NAME_RE.match(text, i + 1)
        return Piece("var", m.group(0), quoted), m.end()
    if nxt and nxt in "0123456789@*#?$!-":
        return Piece("var", nxt, quoted), i + 2
    if nxt == "'" and not quoted:   # $'...': ANSI-C quoting, read as a literal (a backslash escapes the quote)
        return ansi_c(text, i + 2)
    return Piece("lit", "$", quoted), i + 1


ANSI_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f",
                  "v": "\v", "\\": "\\", "'": "'", '"': '"', "?": "?"}


def ansi_c(text: str, j: int) -> tuple[Piece, int]:
    """The body of ``$'...'`` starting at ``j`` (just past the opening quote): bash's backslash escapes
    (``\\'`` does not close it; other escapes such as ``\\x41`` are kept as written), and the index after it."""
    buf, n = [], len(text)
    while j < n and text[j] != "'":
        if text[j] == "\\" and j + 1 < n:
            buf.append(ANSI_C_ESCAPES.get(text[j + 1], text[j:j + 2]))
            j += 2
            continue
        buf.append(text[j])
        j += 1
    return Piece("lit", "".join(buf), True), min(j + 1, n)


def _double_quoted(text: str, i: int, pieces: list[Piece]) -> int:
    """Read the ``"..."`` at ``i`` into ``pieces``; return the index after the closing quote."""
    j, n, buf = i + 1, len(text), []

    def flush() -> None:
        if buf:
            pieces.append(Piece("lit", "".join(buf), True))
            buf.clear()
    while j < n and text[j] != '"':
        ch = text[j]
        if ch == "\\" and j + 1 < n:
            if text[j + 1] == "\n":
                j += 2
                continue
            buf.append(text[j + 1] if text[j + 1] in '"\\$`' else text[j:j + 2])
            j += 2
        elif ch == "$":
            flush()
            piece, j = _dollar(text, j, True)
            pieces.append(piece)
        elif ch == "`":
            flush()
            close = text.find("`", j + 1)
            end = n if close < 0 else close + 1
            pieces.append(Piece("sub", text[j:end], True))
            j = end
        else:
            buf.append(ch)
            j += 1
    flush()
    return j + 1


def _read_word(lx: Lexer) -> Word | None:
    """The word starting at ``lx.i`` (None when an operator or blank starts there)."""
    text, start, pieces = lx.text, lx.i, []
    j, n = lx.i, len(lx.text)
    while j < n:
        ch = text[j]
        if ch in " \t\r\n;&|()<>":
            break
        if ch == "\\":
            if text[j + 1:j + 2] == "\n":
                lx.line += 1
                j += 2
                continue
            pieces.append(Piece("lit", text[j + 1:j + 2], True))
            j += 2
        elif ch == "'":
            close = text.find("'", j + 1)
            end = n if close < 0 else close + 1
            lx.line += text.count("\n", j, end)
            pieces.append(Piece("lit", text[j + 1:end - 1], True))
            j = end
        elif ch == '"':
            end = _double_quoted(text, j, pieces)
            lx.line += text.count("\n", j, end)
            j = end
        elif ch == "$":
            piece, end = _dollar(text, j, False)
            lx.line += text.count("\n", j, end)
            pieces.append(piece)
            j = end
        elif ch == "`":
            close = text.find("`", j + 1)
            end = n if close < 0 else close + 1
            pieces.append(Piece("sub", text[j:end], False))
            j = end
        else:
            k = j
            while k < n and text[k] not in " \t\r\n;&|()<>\\'\"$`":
                k += 1
            pieces.append(Piece("lit", text[j:k], False))
            j = k
    lx.i = j
    if j == start:
        return None
    merged: list[Piece] = []
    for p in pieces:   # join adjacent literals of the same quoting
        if merged and p.kind == "lit" == merged[-1].kind and p.quoted == merged[-1].quoted:
            merged[-1] = Piece("lit", merged[-1].text + p.text, p.quoted)
        else:
            merged.append(p)
    return Word(tuple(merged), text[start:j])


def _skip_heredocs(lx: Lexer) -> None:
    """After a newline: skip the bodies of the heredocs opened on the line just read (they are data)."""
    for delim, strip in lx.heredocs:
        while lx.i < len(lx.text):
            nl = lx.text.find("\n", lx.i)
            end = len(lx.text) if nl < 0 else nl
            line = lx.text[lx.i:end]
            lx.i = end + 1
            lx.line += 1
            if (line.lstrip("\t") if strip else line) == delim:   # bash: exactly the word, nothing around it
                break
    lx.heredocs.clear()


def heredoc_word(text: str, i: int) -> tuple[str, int] | None:
    """The delimiter of a heredoc whose word starts at ``i`` (blanks before it skipped) and the index after
    the word: bash removes its quotes and backslashes, whatever part of it they cover (``E"O"F``, ``'E'OF``
    and ``\\EOF`` all end at a line ``EOF``). None: no word there."""
    n = len(text)
    while i < n and text[i] in " \t":
        i += 1
    out: list[str] = []
    start = i
    while i < n and text[i] not in " \t\n;&|<>()":
        ch = text[i]
        if ch == "'":
            close = text.find("'", i + 1)
            close = n if close < 0 else close
            out.append(text[i + 1:close])
            i = close + 1
        elif ch == '"':
            j = i + 1
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
                    j += 1
                out.append(text[j])
                j += 1
            i = j + 1
        elif ch == "\\" and i + 1 < n:
            out.append(text[i + 1])
            i += 2
        else:
            out.append(ch)
            i += 1
    if i == start:
        return None
    return "".join(out), min(i, n)


def _read_redirection(lx: Lexer) -> None:
    text = lx.text
    m = re.compile(r"&>>?|<<<|<<-?|>>|>&|<&|>\||<>|>|<").match(text, lx.i)
    op = m.group(0)
    lx.i = m.end()
    if op in ("<<", "<<-"):
        hd = heredoc_word(text, lx.i)
        if hd:
            lx.heredocs.append((hd[0], op == "<<-"))
            lx.i = hd[1]
        return
    if op in (">&", "<&"):
        fd = re.compile(r"[ \t]*(\d+-?|-)").match(text, lx.i)
        if fd:
            lx.i = fd.end()
            return
    lx.toks.append(Tok("redir", op, lx.line))


def _read_array(lx: Lexer, name: str, append: bool, line: int) -> None:
    """``name=( ... )``: elements up to the matching ``)``, over lines, comments skipped."""
    lx.i += 1   # past "("
    items: list[Word] = []
    while lx.i < len(lx.text):
        ch = lx.text[lx.i]
        if ch == ")":
            lx.i += 1
            break
        if ch == "\n":
            lx.line += 1
            lx.i += 1
        elif ch in " \t\r":
            lx.i += 1
        elif ch == "#":
            nl = lx.text.find("\n", lx.i)
            lx.i = len(lx.text) if nl < 0 else nl
        else:
            word = _read_word(lx)
            if word is None:
                lx.i += 1   # an operator inside an array: not in the subset; skip it
            else:
                items.append(word)
    lx.toks.append(Tok("array", name, line, items=tuple(items), append=append))


def tokenize(script: str) -> list[Tok]:
    lx = Lexer(script[:MAX_SCRIPT])
    text, n = lx.text, len(lx.text)
    at_word_start = True
    while lx.i < n:
        ch = text[lx.i]
        if ch == "\n":
            lx.toks.append(Tok("op", "\n", lx.line))
            lx.i += 1
            lx.line += 1
            _skip_heredocs(lx)
            at_word_start = True
            continue
        if ch in " \t\r":
            lx.i += 1
            at_word_start = True
            continue
        if ch == "#" and at_word_start:
            nl = text.find("\n", lx.i)
            lx.i = n if nl < 0 else nl
            continue
        two = text[lx.i:lx.i + 2]
        if text.startswith(";;&", lx.i):   # case fall-through terminators: one token each, never `;` then `&`
            lx.toks.append(Tok("op", ";;&", lx.line))
            lx.i += 3
        elif two in ("&&", "||", ";;", ";&"):
            lx.toks.append(Tok("op", two, lx.line))
            lx.i += 2
        elif two == "|&":   # a pipe that carries stderr too: for the status, a pipe
            lx.toks.append(Tok("op", "|", lx.line))
            lx.i += 2
        elif two in ("<(", ">("):   # process substitution: a word whose command runs beside this one
            end = _match_close(text, lx.i + 1, "(", ")")
            src = text[lx.i:end]
            lx.toks.append(Tok("word", "", lx.line, Word((Piece("proc", src, False),), src)))
            lx.line += src.count("\n")
            lx.i = end
        elif ch in "<>" or two == "&>":
            _read_redirection(lx)
        elif ch in ";&|()":
            lx.toks.append(Tok("op", ch, lx.line, glued=ch == "(" and text[lx.i - 1:lx.i] == "(" and lx.i > 0))
            lx.i += 1
        else:
            line = lx.line
            word = _read_word(lx)
            if word is None:
                lx.i += 1
                continue
            if not word.pieces and word.raw.replace("\\\r\n", "").replace("\\\n", "") == "":
                continue   # only line continuations between words (`a | \` then `while ...`): no word at all
            lit = word.literal
            m = ARRAY_ASSIGN_RE.match(lit or "")
            if m and text[lx.i:lx.i + 1] == "(":
                _read_array(lx, m.group(1), bool(m.group(2)), line)
            elif lit and lit.isdigit() and lx.i < n and text[lx.i] in "<>":
                pass   # a file descriptor number before a redirection (2>&1, 2>/dev/null)
            else:
                lx.toks.append(Tok("word", "", line, word))
        at_word_start = True
    return lx.toks


ASSIGN_RE = re.compile(r"^([A-Za-z_]\w*)(\+?)=")


@dataclass
class Refused:
    """Where bash would refuse the script: a syntax error in the top-level command that follows (bash reads
    and runs one top-level command at a time, so what came before has run; it exits with status 2 here,
    through the EXIT trap)."""
    why: str
    line: int


class Parser:
    """Recursive descent over tokens; every loop advances, so any input ends. Lenient: what bash would
    refuse is read anyway, and the first such place is recorded (``broken``) for :class:`Refused`."""

    def __init__(self, toks: list[Tok]):
        self.toks, self.i = toks, 0
        self.broken = ""   # why bash would refuse the script (the first syntax error seen), "" when none
        self.marked = False   # the Refused node for it is in the top-level list

    def mark(self, out: list, at: int) -> None:
        """Put the Refused node before ``out[at]``, the first command of the line that holds the error."""
        line = out[at].line if at < len(out) else (self.peek() or self.toks[-1]).line if self.toks else 1
        out.insert(at, Refused(self.broken, line))
        self.marked = True

    def refuse(self, why: str) -> None:
        if not self.broken:
            tok = self.peek() or (self.toks[-1] if self.toks else None)
            self.broken = f"{why} (line {tok.line if tok else 1})"

    def expect_word(self, word: str, construct: str) -> None:
        """Step past reserved word ``word``; a construct without it is a syntax error."""
        if self.word_is(word):
            self.i += 1
        else:
            self.refuse(f"`{construct}` without `{word}`")

    def peek(self) -> Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def word_is(self, *texts: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "word" and tok.word.literal in texts

    def op_is(self, *texts: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind == "op" and tok.text in texts

    def skip_separators(self) -> None:
        while self.op_is("\n", ";", "&"):
            self.i += 1

    def parse_list(self, stops: frozenset[str] = frozenset(), top: bool = False) -> list:
        """Commands up to a stop word or a closing token. ``top``: the script's own list, where the first
        syntax error puts a :class:`Refused` before the command that holds it."""
        out: list = []
        line_start = 0        # index in ``out`` of the first command of the line being read: bash reads and
        command_here = False  # runs a whole line (a compound: all its lines) before the next, so a syntax
        while True:           # error refuses the line it is on, from its first command
            if top and self.broken and not self.marked:   # a stray token skipped on the last pass
                self.mark(out, line_start)
            while self.op_is("\n", ";", "&"):
                if self.op_is("\n"):
                    line_start, command_here = len(out), False
                elif not command_here:   # `;` or `&` where a command belongs (a line's start, `; ;`, `&;`)
                    self.refuse(f"`{self.peek().text}` where a command belongs")
                    if top and not self.marked:
                        self.mark(out, line_start)
                else:
                    command_here = False
                self.i += 1
            tok = self.peek()
            if tok is None or self.op_is(")", ";;", ";&", ";;&") or (tok.kind == "word" and tok.word.literal in stops):
                if top and self.broken and not self.marked:
                    self.mark(out, line_start)
                return out
            before = self.i
            node = self.parse_and_or(stops)
            if node is not None:
                out.append(node)
                node.background = self.op_is("&")
                command_here = True
                if top and self.broken and not self.marked:
                    self.mark(out, line_start)
            if self.i == before:
                self.refuse(f"`{tok.text}` where a command belongs")
                self.i += 1   # a token the subset does not read (a stray reserved word): skip it

    def parse_and_or(self, stops: frozenset[str]) -> AndOr | None:
        tok = self.peek()
        items, negate, op = [], [], ""
        while True:
            neg = False
            while self.word_is("!"):
                neg = not neg
                self.i += 1
            pipeline = [self.parse_command(stops)]
            while self.op_is("|"):
                self.i += 1
                while self.op_is("\n"):
                    self.i += 1
                pipeline.append(self.parse_command(stops))
            items.append((op, [p for p in pipeline if p is not None]))
            negate.append(neg)
            if self.op_is("&&", "||"):
                op = self.peek().text
                self.i += 1
                while self.op_is("\n"):
                    self.i += 1
                continue
            return AndOr(items, negate, tok.line if tok else 0)

    def parse_command(self, stops: frozenset[str]):
        node = self.parse_command_itself(stops)
        if node is not None and not isinstance(node, Simple):   # `done < list`, `} > log 2>&1`, `fi <<< x`
            while self.peek() is not None and self.peek().kind == "redir":
                self.i += 1
                if self.peek() is not None and self.peek().kind == "word":
                    self.i += 1
        return node

    def parse_command_itself(self, stops: frozenset[str]):
        tok = self.peek()
        if tok is None:
            return None
        if tok.kind == "op" and tok.text == "(":
            self.i += 1
            if self.op_is("(") and self.peek().glued:   # (( arithmetic )): not in the subset; its status is
                # unknown (`( (` with a blank between is two subshells)
                depth = 2
                self.i += 1
                words = [Word((Piece("lit", "((", False),), "((")]
                while self.peek() is not None and depth:
                    t = self.peek()
                    depth += (t.kind == "op" and t.text == "(") - (t.kind == "op" and t.text == ")")
                    self.i += 1
                return Simple(words, [], tok.line)
            body = self.parse_list()
            if self.op_is(")"):
                self.i += 1
            else:
                self.refuse("`(` without `)`")
            return Group(body, True, tok.line)
        if tok.kind == "redir":   # `> log` (truncate), `2>/dev/null cmd`: a simple command
            return self.parse_simple(stops)
        if tok.kind != "word" and tok.kind != "array":
            return None
        lit = tok.word.literal if tok.kind == "word" else None
        if lit == "if":
            return self.parse_if(tok.line)
        if lit in ("while", "until"):
            self.i += 1
            cond = self.parse_list(frozenset({"do"}))
            body = self.parse_do()
            return Loop(lit, "", None, cond, body, tok.line)
        if lit == "for":
            return self.parse_for(tok.line)
        if lit == "case":
            return self.parse_case(tok.line)
        if lit == "{":
            self.i += 1
            body = self.parse_list(frozenset({"}"}))
            self.expect_word("}", "{")
            return Group(body, False, tok.line)
        if lit == "function":
            self.i += 1
            name = self.peek()
            self.i += 1
            if self.op_is("("):
                self.i += 2
            return self.parse_function(name.word.literal if name and name.kind == "word" else "", tok.line)
        if lit and NAME_RE.fullmatch(lit) and self.i + 2 < len(self.toks) and \
                self.toks[self.i + 1].kind == "op" and self.toks[self.i + 1].text == "(" and \
                self.toks[self.i + 2].kind == "op" and self.toks[self.i + 2].text == ")":
            self.i += 3
            return self.parse_function(lit, tok.line)
        return self.parse_simple(stops)

    def parse_function(self, name: str, line: int) -> FuncDef:
        while self.op_is("\n"):
            self.i += 1
        body = self.parse_command(frozenset())
        return FuncDef(name, [body] if body is not None else [], line)

    def parse_do(self) -> list:
        self.skip_separators()
        self.expect_word("do", "a loop")
        body = self.parse_list(frozenset({"done"}))
        self.expect_word("done", "a loop")
        return body

    def parse_if(self, line: int) -> If:
        clauses, orelse = [], None
        self.i += 1
        while True:
            cond = self.parse_list(frozenset({"then"}))
            self.expect_word("then", "if")
            body = self.parse_list(frozenset({"elif", "else", "fi"}))
            clauses.append((cond, body))
            if self.word_is("elif"):
                self.i += 1
                continue
            if self.word_is("else"):
                self.i += 1
                orelse = self.parse_list(frozenset({"fi"}))
            self.expect_word("fi", "if")
            return If(clauses, orelse, line)

    def parse_for(self, line: int) -> Loop:
        self.i += 1
        var = self.peek()
        name = var.word.literal if var and var.kind == "word" and var.word.literal else ""
        self.i += 1
        items = None
        self.skip_separators()
        if self.word_is("in"):
            self.i += 1
            items = []
            while self.peek() is not None and self.peek().kind == "word":
                items.append(self.peek().word)
                self.i += 1
        body = self.parse_do()
        return Loop("for", name, items, [], body, line)

    def parse_case(self, line: int) -> Case:
        self.i += 1
        tok = self.peek()
        word = tok.word if tok and tok.kind == "word" else Word((), "")
        self.i += 1
        self.skip_separators()
        if self.word_is("in"):
            self.i += 1
        arms, ends = [], []
        while True:
            self.skip_separators()
            if self.peek() is None or self.word_is("esac"):
                if self.peek() is None:
                    self.refuse("`case` without `esac`")
                self.i += 1
                return Case(word, arms, line, ends)
            if self.op_is("("):
                self.i += 1
            patterns = []
            while self.peek() is not None and not self.op_is(")"):
                t = self.peek()
                if t.kind == "word":
                    patterns.append(t.word)
                self.i += 1
            self.i += 1
            body = self.parse_list(frozenset({"esac"}))
            arms.append((patterns, body))
            ends.append(self.peek().text if self.op_is(";;", ";&", ";;&") else ";;")
            if self.op_is(";;", ";&", ";;&"):
                self.i += 1

    def parse_simple(self, stops: frozenset[str]) -> Simple:
        tok = self.peek()
        words: list[Word] = []
        assigns: list = []
        in_test = False
        while True:
            t = self.peek()
            if t is None:
                break
            if t.kind == "op":
                if in_test and t.text in ("&&", "||", "(", ")", "|"):   # [[ a && b ]], `=~ ^(a|b)$`: the test
                    words.append(Word((Piece("lit", t.text, False),), t.text))
                    self.i += 1
                    continue
                break
            if t.kind == "redir":
                self.i += 1
                if self.peek() is not None and self.peek().kind == "word":
                    self.i += 1   # its target is not an argument
                continue
            if t.kind == "array":
                if not words:
                    assigns.append((t.text, t.items, t.append))
                self.i += 1
                continue
            lit = t.word.literal
            # a reserved word ends the list only where a command starts (`echo done` prints "done")
            if not words and lit in RESERVED_END and lit in stops:
                break
            if not words and not assigns and lit in RESERVED_END:   # `fi` with no `if` open
                self.refuse(f"`{lit}` where a command belongs")
            first = t.word.pieces[0] if t.word.pieces else None
            m = ASSIGN_RE.match(first.text) if first is not None and first.kind == "lit" and not first.quoted else None
            if not words and m:
                rest = (Piece("lit", first.text[m.end():], False),) + t.word.pieces[1:]
                rest = tuple(p for p in rest if p.kind != "lit" or p.text or p.quoted)
                assigns.append((m.group(1), Word(rest, t.word.raw[m.end():]), bool(m.group(2))))
            else:
                words.append(t.word)
                if lit == "[[" and len(words) == 1:
                    in_test = True
                elif lit == "]]" and in_test:
                    in_test = False
            self.i += 1
        return Simple(words, assigns, tok.line)


def parse(script: str) -> list:
    """The statements of a script (never raises). Before the first top-level command that holds a syntax
    error, a :class:`Refused` node: bash exits there (the command itself follows, read leniently)."""
    parser = Parser(tokenize(script))
    out: list = []
    while parser.peek() is not None:
        before = parser.i
        out += parser.parse_list(top=True)
        if parser.i == before:   # a stray ")" or ";;" at the top level
            parser.refuse(f"`{parser.peek().text}` where a command belongs")
            parser.i += 1
        if parser.broken and not parser.marked:
            parser.mark(out, len(out))
    return out
