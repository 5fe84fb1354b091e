"""Read a workflow step's ``run:`` script as commands, and say what could mask a command's exit.

A deliberately small reader of POSIX shell: words (quotes removed), commands
separated by newlines, ``;``, ``&&``, ``||``, ``|`` and ``&``; ``${{ ... }}``
expressions are kept whole as one word piece. :func:`masking` answers "can the
exit status of command k fail to become the step's exit status?".

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from ci.github.shell_syntax import ansi_c, heredoc_word

OPERATORS = ("||", "&&", "|", ";", "&", "\n")
# commands whose arguments are text, never a command to run (``echo nox -s suite ...``)
NOT_A_RUN = frozenset({"echo", "printf", "true", "false", ":", "cat", "test", "[", "[[", "grep", "sed", "awk",
                       "export", "declare", "local", "readonly", "alias", "exit", "return", "#"})


def not_a_run(words: tuple[str, ...]) -> bool:
    """``words`` name the runner only as text: ``echo``, ``/bin/echo``, ``builtin echo``, ``command printf``..."""
    while len(words) > 1 and words[0] in ("builtin", "command") and not words[1].startswith("-"):
        words = words[1:]
    return bool(words) and words[0].rpartition("/")[2] in NOT_A_RUN


_ASSIGN_STATUS_RE = re.compile(r"^([A-Za-z_]\w*)=\$\?$")
_EXIT_VAR_RE = re.compile(r"^\$\{?([A-Za-z_]\w*)(?::-[^}]*)?\}?$")


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    op_after: str          # the operator that follows it ("" at the end of the script)
    line: int              # 1-based line of the script where it starts


class _CommandBuilder:
    """Collects word pieces into words and words into commands while a script is read."""

    def __init__(self) -> None:
        self.commands: list[Command] = []
        self.words: list[str] = []
        self.word: list[str] = []
        self.in_word = False
        self.line = 1
        self.start_line = 1
        self.lines: _LineIndex | None = None   # built at the first heredoc

    def add(self, piece: str) -> None:
        """Append a piece to the word being read."""
        self.word.append(piece)
        self.in_word = True

    def end_word(self) -> None:
        """Finish the word being read, if any."""
        if self.in_word:
            self.words.append("".join(self.word))
        self.word, self.in_word = [], False

    def end_command(self, op: str) -> None:
        """Finish the command being read; ``op`` is the operator that ends it."""
        self.end_word()
        if self.words or op in ("||", "&&", "|", "&"):
            self.commands.append(Command(tuple(self.words), op, self.start_line))
        self.words = []
        self.start_line = self.line

    def end_line(self) -> None:
        """Finish the command at a newline and move to the next line."""
        self.end_command("\n")
        self.line += 1
        self.start_line = self.line


def _read_expression(text: str, i: int) -> tuple[str, int]:
    """The ``${{ ... }}`` expression at ``i``, kept whole, and the index after it."""
    close = text.find("}}", i)
    close = len(text) - 2 if close < 0 else close
    return text[i:close + 2], close + 2


def _read_single_quoted(text: str, i: int) -> tuple[str, int]:
    """The text of the ``'...'`` quote at ``i`` (quotes removed) and the index after it."""
    close = text.find("'", i + 1)
    close = len(text) if close < 0 else close
    return text[i + 1:close], close + 1


def _read_double_quoted(text: str, i: int) -> tuple[str, int]:
    """The text of the ``"..."`` quote at ``i`` (quotes and escapes removed) and the index after it."""
    n = len(text)
    j = i + 1
    buf = []
    while j < n and text[j] != '"':
        if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
            buf.append(text[j + 1])
            j += 2
            continue
        if text.startswith("${{", j):
            piece, j = _read_expression(text, j)
            buf.append(piece)
            continue
        buf.append(text[j])
        j += 1
    return "".join(buf), j + 1


def _read_substitution(text: str, i: int) -> tuple[str, int]:
    """The ``$( ... )`` or ``${ ... }`` at ``i``, kept whole up to the matching close, and the index after it."""
    opener, closer = text[i + 1], ")" if text[i + 1] == "(" else "}"
    depth, j = 0, i + 1
    while j < len(text):
        if text[j] == opener:
            depth += 1
        elif text[j] == closer:
            depth -= 1
            if depth == 0:
                break
        j += 1
    return text[i:j + 1], j + 1


def _read_piece(text: str, i: int) -> tuple[str, int] | None:
    """The expression, quote or substitution starting at ``i`` and the index after it (None: none starts there)."""
    if text.startswith("${{", i):
        return _read_expression(text, i)
    ch = text[i]
    if ch == "'":
        return _read_single_quoted(text, i)
    if ch == '"':
        return _read_double_quoted(text, i)
    if ch == "$" and i + 1 < len(text) and text[i + 1] in "({":
        return _read_substitution(text, i)
    if ch == "$" and text[i + 1:i + 2] == "'":   # $'...': a backslash escapes the quote
        piece, end = ansi_c(text, i + 2)
        return piece.text, end
    return None


class _LineIndex:
    """Where each line of a script starts and ends, by its text (and by its text without leading tabs):
    a heredoc's terminator is a lookup, not a search of the rest of the script. A search per heredoc made
    a crafted script of thousands of unterminated heredocs quadratic (256 KB: 22 s; 1 MiB: hours)."""

    def __init__(self, text: str) -> None:
        self.exact: dict[str, tuple[list[int], list[int]]] = {}
        self.untabbed: dict[str, tuple[list[int], list[int]]] = {}
        start = 0
        for line in text.split("\n"):
            for table, key in ((self.exact, line), (self.untabbed, line.lstrip("\t"))):
                starts, ends = table.setdefault(key, ([], []))
                starts.append(start)
                ends.append(start + len(line))
            start += len(line) + 1

    def end_of_first(self, key: str, after: int, strip_tabs: bool) -> int | None:
        """The end of the first line at or after index ``after`` whose text is ``key``."""
        starts, ends = (self.untabbed if strip_tabs else self.exact).get(key, ((), ()))
        k = bisect.bisect_left(starts, after)
        return ends[k] if k < len(starts) else None


def _heredoc_stop(text: str, i: int, lines: _LineIndex) -> int | None:
    """The index just past the terminator line of the heredoc ``<<WORD`` at ``i`` (None: no complete heredoc)."""
    if not text.startswith("<<", i) or text.startswith("<<<", i):
        return None
    strip_tabs = text.startswith("<<-", i)
    word = heredoc_word(text, i + (3 if strip_tabs else 2))
    if not word or text.find("\n", i) < 0:
        return None
    # bash ends the body only at a line that is exactly the word (leading tabs stripped for <<-)
    return lines.end_of_first(word[0], i, strip_tabs)


def _read_next(text: str, i: int, out: _CommandBuilder) -> int:
    """Read what starts at ``text[i]`` into ``out``; return the index where the next read starts."""
    read = _read_piece(text, i)
    if read is not None:
        out.add(read[0])
        return read[1]
    ch = text[i]
    if ch == "#" and not out.in_word:
        nl = text.find("\n", i)
        return len(text) if nl < 0 else nl
    if ch == "\n":
        out.end_line()
        return i + 1
    if ch in " \t\r":
        out.end_word()
        return i + 1
    two = text[i:i + 2]
    if two in ("||", "&&"):
        out.end_command(two)
        return i + 2
    if ch == "&" and ((out.word and out.word[-1] in "<>") or text[i + 1:i + 2] == ">"):
        out.add(ch)   # a redirection (2>&1, &>file), not the background operator
        return i + 1
    if ch == "<":
        if out.lines is None:
            out.lines = _LineIndex(text)
        stop = _heredoc_stop(text, i, out.lines)   # a heredoc: its body is data, not commands
        if stop is not None:
            out.line += text.count("\n", i, stop)
            out.end_command("\n")
            return stop
    if ch in "|;&":
        out.end_command(ch)
        return i + 1
    out.add(ch)
    return i + 1


def split_commands(script: str) -> list[Command]:
    """Commands of a script; a backslash-newline continues a line; ``#`` starts a comment."""
    text = script.replace("\\\r\n", " ").replace("\\\n", " ")
    out = _CommandBuilder()
    i = 0
    while i < len(text):
        i = _read_next(text, i, out)
    out.end_command("")
    return out.commands


def _is_noop_success(words: tuple[str, ...]) -> bool:
    return bool(words) and (words[0] in ("true", ":", "echo", "printf")
                            or (words[0] == "exit" and (len(words) == 1 or words[1] == "0")))


@dataclass(frozen=True)
class StepShell:
    """How a step's ``shell:`` runs its script: read as bash or not, with errexit and pipefail or not."""
    bash: bool
    errexit: bool
    pipefail: bool
    why: str = ""   # why the script is not read as bash ("" when it is)


_HARMLESS_FLAGS = set("xvuhBCHPT")   # bash options that neither hide a failure nor run other files


def step_shell(shell: str | None) -> StepShell:
    """GitHub's templates: none -> ``bash -e {0}``; ``bash`` -> ``bash --noprofile --norc -eo pipefail {0}``;
    ``sh`` -> ``sh -e {0}``; ``python``, ``pwsh``, ``powershell``, ``cmd``: not a POSIX shell (pwsh and cmd
    stop on nothing but the last command's code). A custom template: only the options before ``{0}``
    count, in order (``+o pipefail`` turns it off); a program other than bash, or an option the audit does
    not read (``-l``: profile files), and the script is not read as bash."""
    if shell is None:
        return StepShell(True, True, False)
    text = shell.strip()
    if text == "bash":
        return StepShell(True, True, True)
    if text == "sh":
        return StepShell(False, True, False, "its shell `sh` is not bash (`[[`, arrays, `$'...'` differ)")
    if text in ("python", "pwsh", "powershell", "cmd"):
        return StepShell(False, False, False, f"its shell `{text}` is not bash")
    tokens = text.split()
    program = tokens[0].rpartition("/")[2] if tokens else ""
    options = tokens[1:tokens.index("{0}")] if "{0}" in tokens else tokens[1:]
    errexit = pipefail = False
    readable = True
    i = 0
    while i < len(options):
        word = options[i]
        if word in ("--noprofile", "--norc"):
            pass
        elif word[:1] in ("-", "+") and len(word) > 1 and not word.startswith("--"):
            on = word[0] == "-"
            for ch in word[1:]:
                if ch == "e":
                    errexit = on
                elif ch == "o" and i + 1 < len(options):
                    i += 1
                    if options[i] == "errexit":
                        errexit = on
                    elif options[i] == "pipefail":
                        pipefail = on
                elif ch not in _HARMLESS_FLAGS:
                    readable = False
        else:
            readable = False
        i += 1
    if program != "bash":
        return StepShell(False, errexit, pipefail, f"its shell `{short_text(text)}` is not bash")
    if not readable:
        return StepShell(False, errexit, pipefail,
                         f"its shell `{short_text(text)}` has options the audit does not read")
    return StepShell(True, errexit, pipefail)


def short_text(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _shell_has_errexit(shell: str | None) -> bool:
    return step_shell(shell).errexit


def _shell_has_pipefail(shell: str | None) -> bool:
    return step_shell(shell).pipefail


_OPENS = {"{": "}", "(": ")"}
_FUNCTION_RE = re.compile(r"^([A-Za-z_][\w.-]*)\(\)$")
_TRAP_EXITS_RE = re.compile(r"\bexit\b(?!\s*(\$\?|\"\$\?\"|\$\{\?\}))")  # `exit`, `exit 0`: not `exit $?`


def _group_open(words: tuple[str, ...]) -> tuple[str, str | None] | None:
    """(opening token, function name or None) when a command opens a `{ ... }` / `( ... )` group:
    `{ a`, `then { a`, `run() {`, `function run {`, `( a`."""
    for i, word in enumerate(words):
        if word in _OPENS and (i == 0 or words[i - 1] in ("then", "do", "else", "&&", "||", "!")
                               or _FUNCTION_RE.match(words[i - 1]) or words[:1] == ("function",)):
            name = None
            if i > 0 and _FUNCTION_RE.match(words[i - 1]):
                name = _FUNCTION_RE.match(words[i - 1]).group(1)
            elif words[:1] == ("function",) and i >= 2:
                name = words[1].removesuffix("()")
            return word, name
    return None


def _enclosing_groups(commands: list[Command], k: int) -> list[tuple[int, str | None]]:
    """(index of the command that closes it, function name or None) for each group around ``commands[k]``,
    innermost first."""
    stack: list[tuple[str, str | None]] = []
    for j in range(k + 1):
        opened = _group_open(commands[j].words)
        if opened is not None and (j < k or commands[j].words[0] in _OPENS):
            stack.append(opened)
        if j < k and commands[j].words[:1] and commands[j].words[0] in _OPENS.values() and stack:
            stack.pop()
    out = []
    for token, name in reversed(stack):
        depth = 0
        for c in range(k + 1, len(commands)):
            words = commands[c].words
            if _group_open(words) is not None:
                depth += 1
            if words[:1] == (_OPENS[token],):
                if depth == 0:
                    out.append((c, name))
                    break
                depth -= 1
    return out


def _trap_masks(commands: list[Command], k: int) -> list[str]:
    """An EXIT or ERR trap set before the call whose handler exits: its status replaces the failure's."""
    for prev in commands[:k]:
        w = prev.words
        if w[:1] == ("trap",) and len(w) >= 3 and w[1] != "-" and _TRAP_EXITS_RE.search(w[1]) \
                and any(sig.upper() in ("EXIT", "ERR", "0", "SIGEXIT") for sig in w[2:]):
            return [f"`trap '{w[1][:40]}' {' '.join(w[2:])[:20]}` before it: the handler's exit replaces the failure's"]
    return []


MAX_FLAT_COMMANDS = 4096   # commands of one script the flat reading looks at (each look scans the script)
MAX_FLAT_LOOKS = 256       # places one flat reading judges: a call site of a function holding the runner is one


class FlatLooks:
    """The places one step's flat reading has judged (``(index, depth)`` -> reasons), shared by its runner
    calls. A function holding the runner, called from functions called from ... (depth 4) made 50 calls a
    level 50**4 judgements, each a scan of the script: a 1 KB script took hours. Past MAX_FLAT_LOOKS the
    reading stops with a reason (a mask: never a run)."""

    def __init__(self) -> None:
        self.done: dict[tuple[int, int], list[str]] = {}


def masking(commands: list[Command], k: int, shell: str | None = None, _depth: int = 0,
            looks: FlatLooks | None = None) -> list[str]:
    """Reasons the exit status of ``commands[k]`` may not fail the step (empty: it cannot): its own
    operators, and those of each `{ ... }` / `( ... )` group around it and of each call of a function
    whose body holds it. Bounded: MAX_FLAT_COMMANDS commands, MAX_FLAT_LOOKS places (``looks``)."""
    if len(commands) > MAX_FLAT_COMMANDS:
        return [f"the script has more than {MAX_FLAT_COMMANDS} commands, past what the flat reading follows"]
    looks = FlatLooks() if looks is None else looks
    if (k, _depth) in looks.done:
        return looks.done[(k, _depth)]
    if len(looks.done) >= MAX_FLAT_LOOKS:
        return [f"the runner's function is called in more places than the flat reading follows ({MAX_FLAT_LOOKS})"]
    looks.done[(k, _depth)] = []   # a function that calls itself: no reasons through that call
    reasons = _masking_here(commands, k, shell) + _trap_masks(commands, k)
    if _depth < 4:
        for close, name in _enclosing_groups(commands, k):
            if name is None:
                reasons += [f"its group: {r}" for r in _operator_masks(commands, close, shell)]
                continue
            for call in range(close + 1, len(commands)):
                if commands[call].words[:1] == (name,):
                    reasons += [f"via function `{name}`: {r}"
                                for r in masking(commands, call, shell, _depth + 1, looks)]
            break  # a function body: its own groups were judged through its calls
    looks.done[(k, _depth)] = list(dict.fromkeys(reasons))
    return looks.done[(k, _depth)]


def _operator_masks(commands: list[Command], k: int, shell: str | None) -> list[str]:
    """What the operator after ``commands[k]`` (a group's closing brace) does to its status (errexit
    was judged at the call itself)."""
    return [r for r in _masking_here(commands, k, shell) if "set +e" not in r and "later commands" not in r]


def _masking_here(commands: list[Command], k: int, shell: str | None = None) -> list[str]:
    """The reasons of ``masking`` from ``commands[k]``'s own place in the flat list."""
    reasons: list[str] = []
    cmd = commands[k]
    errexit = _shell_has_errexit(shell)
    pipefail = _shell_has_pipefail(shell)
    for prev in commands[:k]:
        w = prev.words
        if w[:2] == ("set", "+e") or (w and w[0] == "set" and any(x.startswith("+") and "e" in x for x in w[1:])):
            errexit = False
        elif w and w[0] == "set" and any(x.startswith("-") and "e" in x.lstrip("-") and x != "-o" for x in w[1:]):
            errexit = True
        if w and w[0] == "set" and "pipefail" in w:
            pipefail = "+o" not in w
    if not errexit:
        reasons.append("`set +e` (or a shell without -e) before it: a failure does not stop the script")
    if cmd.words and cmd.words[0] in ("!", "if", "elif", "while", "until"):
        reasons.append(f"it is the condition of `{cmd.words[0]}`: its failure is a branch, not an error")
    if k > 0 and commands[k - 1].op_after in ("||", "&&") and commands[k - 1].words[:1] in (("if",), ("while",)):
        reasons.append("it is part of an `if`/`while` condition")
    op = cmd.op_after
    nxt = commands[k + 1] if k + 1 < len(commands) else None
    if op == "||" and nxt is not None:
        assign = _ASSIGN_STATUS_RE.match(nxt.words[0]) if len(nxt.words) == 1 else None
        rethrown = assign and any(
            c.words[:1] == ("exit",) and len(c.words) == 2 and
            (m := _EXIT_VAR_RE.match(c.words[1])) and m.group(1) == assign.group(1)
            for c in commands[k + 2:])
        if not rethrown:
            reasons.append(f"`|| {' '.join(nxt.words) or '...'}` turns its failure into success")
    pipestatus = any(c.words[:1] == ("exit",) and len(c.words) == 2 and "PIPESTATUS" in c.words[1]
                     for c in commands[k + 1:])
    if op == "|" and not pipefail and not pipestatus:
        tail = " ".join(nxt.words[:2]) if nxt else "..."
        reasons.append(f"piped into `{tail}` without `set -o pipefail`: the pipe's exit is the last command's")
    if op == "&" or cmd.words[:1] == ("coproc",):
        reasons.append("run in the background with `&`: the step does not wait for its exit")
    rest = commands[k + 1:]
    if op == ";" or op == "\n" or op == "&&":
        if rest and _is_noop_success(rest[0].words) and rest[0].words[0] in ("true", ":") and op == ";":
            reasons.append("`; true` after it")
    if not errexit and rest:
        reasons.append("later commands decide the step's exit status")
    tail = [c for c in rest if c.words]
    if tail and tail[-1].words[0] == "exit" and (len(tail[-1].words) == 1 or tail[-1].words[1] == "0"):
        reasons.append("the script ends with `exit 0`")
    return reasons
