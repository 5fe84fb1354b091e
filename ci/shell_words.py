"""Read a workflow step's ``run:`` script as commands, and say what could mask a command's exit.

A deliberately small reader of POSIX shell: words (quotes removed), commands
separated by newlines, ``;``, ``&&``, ``||``, ``|`` and ``&``; ``${{ ... }}``
expressions are kept whole as one word piece. :func:`masking` answers "can the
exit status of command k fail to become the step's exit status?".

Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

OPERATORS = ("||", "&&", "|", ";", "&", "\n")
# commands whose arguments are text, never a command to run (``echo nox -s suite ...``)
NOT_A_RUN = frozenset({"echo", "printf", "true", "false", ":", "cat", "test", "[", "[[", "grep", "sed", "awk",
                       "export", "declare", "local", "readonly", "alias", "exit", "return", "#"})
_ASSIGN_STATUS_RE = re.compile(r"^([A-Za-z_]\w*)=\$\?$")
_EXIT_VAR_RE = re.compile(r"^\$\{?([A-Za-z_]\w*)(?::-[^}]*)?\}?$")


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    op_after: str          # the operator that follows it ("" at the end of the script)
    line: int              # 1-based line of the script where it starts


def split_commands(script: str) -> list[Command]:
    """Commands of a script; a backslash-newline continues a line; ``#`` starts a comment."""
    text = script.replace("\\\r\n", " ").replace("\\\n", " ")
    commands: list[Command] = []
    words: list[str] = []
    word: list[str] = []
    in_word = False
    line = 1
    start_line = 1
    i, n = 0, len(text)

    def end_word() -> None:
        nonlocal word, in_word
        if in_word:
            words.append("".join(word))
        word, in_word = [], False

    def end_command(op: str) -> None:
        nonlocal words, start_line
        end_word()
        if words or op in ("||", "&&", "|", "&"):
            commands.append(Command(tuple(words), op, start_line))
        words = []
        start_line = line

    while i < n:
        ch = text[i]
        if text.startswith("${{", i):
            close = text.find("}}", i)
            close = n - 2 if close < 0 else close
            word.append(text[i:close + 2])
            in_word = True
            i = close + 2
            continue
        if ch == "'":
            close = text.find("'", i + 1)
            close = n if close < 0 else close
            word.append(text[i + 1:close])
            in_word = True
            i = close + 1
            continue
        if ch == '"':
            j = i + 1
            buf = []
            while j < n and text[j] != '"':
                if text[j] == "\\" and j + 1 < n and text[j + 1] in '"\\$`':
                    buf.append(text[j + 1])
                    j += 2
                    continue
                if text.startswith("${{", j):
                    close = text.find("}}", j)
                    close = n - 2 if close < 0 else close
                    buf.append(text[j:close + 2])
                    j = close + 2
                    continue
                buf.append(text[j])
                j += 1
            word.append("".join(buf))
            in_word = True
            i = j + 1
            continue
        if ch == "$" and i + 1 < n and text[i + 1] in "({":
            # $( ... ) or ${ ... }: keep as one piece up to the matching close
            opener, closer = text[i + 1], ")" if text[i + 1] == "(" else "}"
            depth, j = 0, i + 1
            while j < n:
                if text[j] == opener:
                    depth += 1
                elif text[j] == closer:
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            word.append(text[i:j + 1])
            in_word = True
            i = j + 1
            continue
        if ch == "#" and not in_word:
            while i < n and text[i] != "\n":
                i += 1
            continue
        if ch == "\n":
            end_command("\n")
            line += 1
            start_line = line
            i += 1
            continue
        if ch in " \t\r":
            end_word()
            i += 1
            continue
        two = text[i:i + 2]
        if two in ("||", "&&"):
            end_command(two)
            i += 2
            continue
        if ch == "&" and ((word and word[-1] in "<>") or text[i + 1:i + 2] == ">"):
            word.append(ch)   # a redirection (2>&1, &>file), not the background operator
            in_word = True
            i += 1
            continue
        if ch == "<" and text.startswith("<<", i) and not text.startswith("<<<", i):
            # a heredoc: its body is data, not commands
            match = re.match(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1", text[i:])
            if match:
                end = re.search(r"^\s*" + re.escape(match.group(2)) + r"\s*$", text[i:], re.M)
                nl = text.find("\n", i)
                if end and nl >= 0:
                    stop = i + end.end()
                    line += text.count("\n", i, stop)
                    i = stop
                    end_command("\n")
                    continue
        if ch in "|;&":
            end_command(ch)
            i += 1
            continue
        word.append(ch)
        in_word = True
        i += 1
    end_command("")
    return commands


def _is_noop_success(words: tuple[str, ...]) -> bool:
    return bool(words) and (words[0] in ("true", ":", "echo", "printf")
                            or (words[0] == "exit" and (len(words) == 1 or words[1] == "0")))


def _shell_has_errexit(shell: str | None) -> bool:
    """GitHub runs an unnamed shell as ``bash -e {0}``; a custom template needs its own -e."""
    if shell is None or shell.strip() in ("bash", "sh", "pwsh", "python", "powershell", "cmd"):
        return True
    return bool(re.search(r"(^|\s)-\w*e", shell))


def _shell_has_pipefail(shell: str | None) -> bool:
    # `shell: bash` runs `bash --noprofile --norc -eo pipefail {0}`; the default (unnamed) shell does not
    if shell is not None and shell.strip() == "bash":
        return True
    return bool(shell and "pipefail" in shell)


def masking(commands: list[Command], k: int, shell: str | None = None) -> list[str]:
    """Reasons the exit status of ``commands[k]`` may not fail the step (empty: it cannot)."""
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
    if op == "&":
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
