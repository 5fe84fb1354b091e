"""Evaluate a ``run:`` script three-valued: which commands it runs, may run, or can never run.

Input: the script with every ``${{ ... }}`` known for one matrix row already substituted
(ci/github/scan.py does that), and what the environment holds (:class:`ShellEnv`). Output:
one :class:`Run` per simple command, with its expanded words and a state: "run" (reached on
every path the script can take), "maybe" (reached only past a condition, loop or construct
known at run time; ``why`` names it) or "never" (after an unconditional ``exit``, in a branch
whose condition is false, in a function nothing calls; ``why`` says which). Unknown values
stay unknown: they fork the paths (at most MAX_PATHS) and never turn a run into "never".
The subset and its limits: docs/audit-shell.md. Imports nothing from ``impl/`` or test code.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field
from typing import Callable

from ci.github.shell import split_commands
from ci.github.shell_syntax import AndOr, Case, FuncDef, Group, If, Loop, Piece, Simple, Word, parse

MAX_PATHS = 32        # live paths through one script; past it, unknown branches merge (variables -> unknown)
MAX_STEPS = 20000     # statements evaluated per script (loops, functions, eval)
MAX_DEPTH = 6         # nested bash -c / eval / function calls
UNKNOWN = None
SHELLS = ("bash", "sh", "zsh", "dash")
C_FLAGS = re.compile(r"^-[a-z]*c[a-z]*$")
# commands that run the rest of their words as a command in the same environment
TRANSPARENT = frozenset({"sudo", "env", "nice", "nohup", "time", "timeout", "stdbuf", "exec", "command",
                         "xargs", "setsid", "numactl", "taskset", "ionice", "unbuffer"})
READERS = frozenset({"read", "mapfile", "readarray", "getopts"})


Decision = tuple[int, bool]   # (id of a condition known only at run time, the side this path took)


@dataclass(frozen=True)
class Run:
    words: tuple[str, ...]   # expanded; an unknown part keeps its source text ($X, ${{ inputs.y }}, $(...))
    line: int                # line of the command in the outer script
    decisions: frozenset[Decision] = frozenset()   # the run-time conditions its path took
    never: str = ""          # non-empty: no path reaches it, and why


@dataclass(frozen=True)
class ShellEnv:
    """What the environment holds for a name the script does not assign."""
    known: tuple[tuple[str, str], ...] = ()   # env: values known for this row
    unknown_names: frozenset[str] = frozenset()   # env: names whose value is known only at run time
    unset_is_empty: bool = True    # False: something outside the script may set any name ($GITHUB_ENV, an image)
    why_open: str = ""             # why unset_is_empty is False (for messages)

    def lookup(self, name: str) -> str | None:
        for key, value in self.known:
            if key == name:
                return value
        if name in self.unknown_names or not self.unset_is_empty or _runner_default(name):
            return UNKNOWN
        return ""


def _runner_default(name: str) -> bool:
    """Names the runner or the image sets whatever the workflow says."""
    return name.startswith(("GITHUB_", "RUNNER_", "ACTIONS_", "INPUT_")) or name in {
        "CI", "HOME", "PATH", "PWD", "OLDPWD", "USER", "HOSTNAME", "SHELL", "LANG", "TERM", "TMPDIR", "RANDOM",
        "SECONDS", "LINENO", "BASH_VERSION", "UID", "EUID", "PPID", "IFS", "OSTYPE", "HOSTTYPE", "MACHTYPE",
        "ImageOS", "ImageVersion", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX"}


@dataclass
class Path:
    vars: dict[str, str | tuple[str, ...] | None] = field(default_factory=dict)
    exported: set[str] = field(default_factory=set)
    funcs: dict[str, FuncDef] = field(default_factory=dict)
    args: tuple[str, ...] | None = ()   # positional parameters (None: unknown, in a function body read alone)
    errexit: bool = True
    maybe: tuple[Decision, ...] = ()   # the run-time conditions this path took
    ghost: str = ""                 # non-empty: the path cannot happen (why); runs on it are "never"
    ended: str = ""                 # "return": the path left the function it was in
    exit_code: str = ""             # the code of the `exit` that made it a ghost ("" when none)
    status: object = True           # last exit status: True, False, None (unknown), "assumed" (success assumed)
    tainted: bool = False           # after `source`/`eval` of something unknown: unset names are unknown

    def copy(self) -> "Path":
        return Path(dict(self.vars), set(self.exported), dict(self.funcs), self.args, self.errexit, self.maybe,
                    self.ghost, self.ended, self.exit_code, self.status, self.tainted)

    def same_state(self, other: "Path") -> bool:
        return (self.vars, self.exported, self.errexit, self.tainted, self.ghost, self.ended, set(self.funcs)) == \
            (other.vars, other.exported, other.errexit, other.tainted, other.ghost, other.ended, set(other.funcs))


class Evaluator:
    def __init__(self, env: ShellEnv):
        self.env = env
        self.runs: list[Run] = []
        self.steps = 0
        self.depth = 0
        self.outer_line = 0   # inside bash -c / eval: the outer command's line
        self.whys: dict[int, str] = {}
        self.in_function = False
        self.in_condition = 0   # inside an if/while condition: set -e does not apply
        self.max_paths = MAX_PATHS

    def condition(self, cond: list, path: Path) -> list[Path]:
        self.in_condition += 1
        try:
            return self.run_list(cond, [path])
        finally:
            self.in_condition -= 1

    def decision(self, why: str) -> int:
        """The id of a run-time condition; the same construct read on two paths is the same condition."""
        for did, text in self.whys.items():
            if text == why:
                return did
        self.whys[len(self.whys)] = why
        return len(self.whys) - 1

    def fork(self, path: Path, why: str, taken_side: Callable[[Path], list[Path]]) -> list[Path]:
        """A condition known only at run time: ``path`` both takes ``taken_side`` and skips it. A taken
        side that fails loudly (``exit 1``) is dropped; one that leaves the state as it was merges back."""
        if path.ghost:   # a path that cannot happen does not branch: it only records what it reaches
            return taken_side(path)
        did = self.decision(why)
        taken = path.copy()
        taken.maybe += ((did, True),)
        results = taken_side(taken)
        kept = [r for r in results if not (r.ghost and r.exit_code not in ("", "0") and r.exit_code.isdigit())]
        kept = [r for r in kept if not (r.same_state(path) and not r.ghost)]
        if kept:
            path.maybe += ((did, False),)
        return [path] + kept

    # ---- values ----
    def var(self, path: Path, name: str) -> str | tuple[str, ...] | None:
        if name in path.vars:
            return path.vars[name]
        if path.tainted:
            return UNKNOWN
        return self.env.lookup(name)

    def expand_var(self, path: Path, inner: str) -> list[str] | str | None:
        """The value of ``${inner}``: a str, a list of words (``${a[@]}``), or None when unknown."""
        if path.args is None and (inner in ("@", "*", "#") or inner.isdigit()):
            return UNKNOWN
        if inner in ("@", "*"):
            return list(path.args)
        if inner == "#":
            return str(len(path.args))
        if inner.isdigit():
            k = int(inner)
            return path.args[k - 1] if 0 < k <= len(path.args) else ""
        if inner in ("?", "$", "!", "-"):
            return UNKNOWN
        m = re.fullmatch(r"([A-Za-z_]\w*)(?:\[(@|\*|\d+)\])?(?:(:?[-+=])(.*))?", inner, re.S)
        if not m:
            length = re.fullmatch(r"#([A-Za-z_]\w*)(?:\[[@*]\])?", inner)
            if length:
                value = self.var(path, length.group(1))
                if isinstance(value, tuple):
                    return str(len(value))
                return UNKNOWN if value is None else str(len(value))
            return UNKNOWN   # ${x#pat}, ${x/a/b}, ...: not in the subset
        name, index, op, alt = m.groups()
        value = self.var(path, name)
        if value is not None and not isinstance(value, tuple) and index in ("@", "*"):
            value = (value,) if value != "" or name in path.vars else ()
        if isinstance(value, tuple):
            if index in ("@", "*"):
                got: list[str] | str | None = list(value)
            elif index is not None:
                got = value[int(index)] if int(index) < len(value) else ""
            else:
                got = value[0] if value else ""
        else:
            got = value
        if op:
            if alt and ("$" in alt or "`" in alt):
                return UNKNOWN
            if got is None:
                return UNKNOWN
            empty = got == "" or got == [] if op.startswith(":") else (name not in path.vars and got in ("", []))
            if op.endswith("-") or op.endswith("="):
                return alt if empty else got
            return "" if empty else alt
        return got

    def expand(self, path: Path, word: Word) -> list[str]:
        """The words ``word`` expands to (unquoted values split on blanks; unknown parts keep their source)."""
        fields: list[list[str]] = [[]]
        started = False
        for piece in word.pieces:
            value = self.piece_value(path, piece)
            if isinstance(value, list):
                if piece.quoted:
                    if not value:
                        continue
                    fields[-1].append(value[0])
                    for item in value[1:]:
                        fields.append([item])
                else:
                    for n, item in enumerate(value):
                        if n:
                            fields.append([])
                        fields[-1].append(item)
                started = started or bool(value)
                continue
            if piece.quoted or piece.kind == "lit" or value is None:
                fields[-1].append(_source(piece) if value is None else value)
                started = started or piece.quoted or bool(fields[-1][-1])
                continue
            parts = value.split()
            if value[:1].isspace() and fields[-1]:
                fields.append([])
            for n, part in enumerate(parts):
                if n:
                    fields.append([])
                fields[-1].append(part)
            if value[-1:].isspace() and parts:
                fields.append([])
            started = started or bool(parts)
        out = ["".join(f) for f in fields]
        return [w for w in out if w or started and any(p.quoted for p in word.pieces)]

    def piece_value(self, path: Path, piece: Piece) -> str | list[str] | None:
        if piece.kind == "lit":
            return piece.text
        if piece.kind == "var":
            return self.expand_var(path, piece.text)
        return UNKNOWN   # a command substitution or a ${{ }} not known for this row

    def scalar(self, path: Path, word: Word) -> str | None:
        """A word's value as one string (None when any part is unknown)."""
        out = []
        for piece in word.pieces:
            value = self.piece_value(path, piece)
            if value is None:
                return None
            out.append(" ".join(value) if isinstance(value, list) else value)
        return "".join(out)

    # ---- statements ----
    def run_list(self, nodes: list, paths: list[Path]) -> list[Path]:
        for node in nodes:
            live = [p for p in paths if not p.ended]
            if not live:
                break
            done = [p for p in paths if p.ended]
            paths = self.limit(done + self.run_node(node, live))
        return paths

    def limit(self, paths: list[Path]) -> list[Path]:
        """At most MAX_PATHS live paths and one ghost path (enough to report what never runs)."""
        ghosts = [p for p in paths if p.ghost]
        live = [p for p in paths if not p.ghost]
        if len(live) <= 2 * MAX_PATHS:   # merging is quadratic: only on a handful of paths
            live = _merge_equal(live)
        if len(live) > self.max_paths:
            merged = live[0].copy()
            for other in live[1:]:
                for name in set(merged.vars) | set(other.vars):
                    if merged.vars.get(name, "\0") != other.vars.get(name, "\0"):
                        merged.vars[name] = UNKNOWN
                merged.ended = merged.ended if merged.ended == other.ended else ""
            did = self.decision(f"more than {MAX_PATHS} paths through the script: the reader stops following them")
            merged.maybe = ((did, True),)
            live = [merged]
        return live + ghosts[:1]

    def run_node(self, node, paths: list[Path]) -> list[Path]:
        self.steps += 1
        if self.steps > MAX_STEPS and self.max_paths > 1:   # past the budget: one path, every run a maybe
            self.max_paths = 1
            did = self.decision("the script is longer than the reader follows")
            for p in paths:
                p.maybe += ((did, True),)
            paths = self.limit(paths)
        if isinstance(node, AndOr):
            return self.run_and_or(node, paths)
        if isinstance(node, If):
            return self.run_if(node, paths)
        if isinstance(node, Loop):
            return self.run_loop(node, paths)
        if isinstance(node, Case):
            return self.run_case(node, paths)
        if isinstance(node, Group):
            if node.subshell:
                return [self.scoped(p, lambda q: self.run_list(node.body, [q])) for p in paths]
            return self.run_list(node.body, paths)
        if isinstance(node, FuncDef):
            for p in paths:
                p.funcs[node.name] = node
            if not self.depth:   # a body nothing calls never runs; record it as such (overwritten if called)
                ghost = Path(args=None, ghost=f"it is in function {node.name}() that the script never calls")
                self.run_list(node.body, [ghost])
            return paths
        if isinstance(node, Simple):
            return self.run_simple(node, paths)
        return paths

    def scoped(self, path: Path, body: Callable[[Path], list[Path]]) -> Path:
        """Run ``body`` on a copy (a subshell): an exit inside ends only it; variables do not leak."""
        results = body(path.copy())
        status = results[0].status if len(results) == 1 else None
        if any(r.ended for r in results):
            status = None
        path.status = status
        return path

    def run_and_or(self, node: AndOr, paths: list[Path]) -> list[Path]:
        out: list[Path] = []
        for path in paths:
            current = [path]
            for n, (op, pipeline) in enumerate(node.items):
                nxt: list[Path] = []
                text = " ".join([f"{a[0]}=..." for c in pipeline if isinstance(c, Simple) for a in c.assigns]
                                + [w.raw for c in pipeline if isinstance(c, Simple) for w in c.words])[:60]
                for p in current:
                    if p.ended:
                        nxt.append(p)
                        continue
                    decide = _chain_decision(op, p.status)
                    if decide is True:
                        nxt += self.run_pipeline(pipeline, [p], node.negate[n])
                    elif decide is False:
                        ghost = p.copy()
                        ghost.ghost = ghost.ghost or f"`{op} {text}` on line {node.line} is never reached"
                        self.run_pipeline(pipeline, [ghost], node.negate[n])
                        nxt.append(p)
                    else:
                        why = (f"`{op} {text}` on line {node.line} runs only if the command before it "
                               f"{'succeeds' if op == '&&' else 'fails'}, known at run time")
                        nxt += self.fork(p, why, lambda q: self.run_pipeline(pipeline, [q], node.negate[n]))
                current = self.limit(nxt)
            last = node.items[-1][1]
            if len(node.items) == 1 and len(last) == 1 and isinstance(last[0], Simple) and not node.negate[0]:
                for p in current:   # set -e: a standalone command that always fails ends the script
                    if p.errexit and p.status is False and not p.ended and not p.ghost and not self.in_condition:
                        p.ghost = f"a command that always fails on line {node.line} ends the script under `set -e`"
                        p.exit_code = "1"
            out += current
        return out

    def run_pipeline(self, pipeline: list, paths: list[Path], negate: bool) -> list[Path]:
        if len(pipeline) > 1:   # each part runs in a subshell: an exit ends only that part
            for path in paths:
                for part in pipeline:
                    self.scoped(path, lambda q, part=part: self.run_node(part, [q]))
                path.status = "assumed"
        elif pipeline:
            paths = self.run_node(pipeline[0], paths)
        if negate:
            for p in paths:
                p.status = {True: False, False: True}.get(p.status, None)
        return paths

    def run_if(self, node: If, paths: list[Path]) -> list[Path]:
        out: list[Path] = []
        for path in paths:
            out += self.run_clauses(node, 0, path)
        for p in out:
            if not p.ended:
                p.status = True
        return self.limit(out)

    def run_clauses(self, node: If, k: int, path: Path) -> list[Path]:
        """Clause ``k`` of an ``if`` (then the elif/else after it) on one path."""
        if k == len(node.clauses):
            return self.run_list(node.orelse or [], [path])
        cond, body = node.clauses[k]
        out: list[Path] = []
        for p in self.condition(cond, path):
            decided = p.status if p.status in (True, False) else None
            if decided is True:
                out += self.run_list(body, [p])
                skipped = p.copy()
                skipped.ghost = skipped.ghost or f"`{_cond_text(cond)}` on line {node.line} is always true"
                self.run_clauses(node, k + 1, skipped)
            elif decided is False:
                ghost = p.copy()
                ghost.ghost = ghost.ghost or f"`{_cond_text(cond)}` on line {node.line} is false"
                self.run_list(body, [ghost])
                out += self.run_clauses(node, k + 1, p)
            else:
                why = f"`{_cond_text(cond)}` on line {node.line} is known only at run time"
                rest: list[Path] = []
                forked = self.fork(p, why, lambda q: self.run_list(body, [q]))
                taken = forked[1:]
                if p.ghost:
                    taken, rest = forked, [p.copy()]
                else:
                    rest = forked[:1]
                out += taken
                for q in rest:
                    out += self.run_clauses(node, k + 1, q)
        return out

    def run_loop(self, node: Loop, paths: list[Path]) -> list[Path]:
        out = []
        for path in paths:
            if node.kind == "for":
                items: list[str] | None = (None if path.args is None else list(path.args)) if node.items is None \
                    else []
                for word in node.items or []:   # a glob (bench_*.py) lists files: known at run time
                    if any(p.kind in ("sub", "expr") or (p.kind == "var" and self.piece_value(path, p) is None)
                           or (p.kind == "lit" and not p.quoted and any(c in p.text for c in "*?["))
                           for p in word.pieces):
                        items = None
                        break
                    items += self.expand(path, word)
                if items is not None and len(items) <= 16:
                    current = [path]
                    for item in items:
                        for p in current:
                            p.vars[node.var] = item
                        current = self.run_list(node.body, current)
                    out += current
                    continue
                why = f"`for {node.var} in ...` on line {node.line} loops over a list known only at run time"
            else:
                why = f"the `{node.kind}` loop on line {node.line} runs a number of times known only at run time"
                path = self.condition(node.cond, path)[0]

            def body(q: Path) -> list[Path]:
                if node.kind == "for":
                    q.vars[node.var] = UNKNOWN
                results = self.run_list(node.body, [q])
                for r in results:   # a second pass could see other values: what the body assigns is unknown
                    for name in list(r.vars):
                        if path.vars.get(name, "\0") != r.vars[name]:
                            r.vars[name] = UNKNOWN
                return results
            out += self.fork(path, why, body)
        for p in out:
            if not p.ended:
                p.status = "assumed"
        return self.limit(out)

    def run_case(self, node: Case, paths: list[Path]) -> list[Path]:
        out = []
        for path in paths:
            value = self.scalar(path, node.word)
            chosen, unknown = None, value is None
            for n, (patterns, _body) in enumerate(node.arms):
                pats = [self.scalar(path, w) for w in patterns]
                if any(p is None for p in pats) and chosen is None:
                    unknown = True
                if value is not None and chosen is None and not unknown and \
                        any(fnmatch.fnmatchcase(value, p) for p in pats if p is not None):
                    chosen = n
            if not unknown or path.ghost:
                for n, (_pats, body) in enumerate(node.arms):
                    if n == chosen:
                        out += self.run_list(body, [path])
                    else:
                        ghost = path.copy()
                        ghost.ghost = ghost.ghost or f"`case {node.word.raw}` on line {node.line} never takes this arm"
                        self.run_list(body, [ghost])
                if chosen is None:
                    out.append(path)
                continue
            why = f"`case {node.word.raw}` on line {node.line} is known only at run time"
            rest = [path]
            for _pats, body in node.arms:
                nxt = []
                for q in rest:
                    forked = self.fork(q, why, lambda r, body=body: self.run_list(body, [r]))
                    out += forked[1:]
                    nxt.append(forked[0])
                rest = nxt
            out += rest
        return self.limit(out)

    # ---- simple commands ----
    def assign(self, path: Path, name: str, value, append: bool) -> None:
        if isinstance(value, tuple):
            items: list[str] = []
            unknown = False
            for word in value:
                if any(p.kind in ("sub", "expr") or self.piece_value(path, p) is None for p in word.pieces):
                    unknown = unknown or not any(p.quoted for p in word.pieces)
                items += self.expand(path, word)
            if unknown:
                path.vars[name] = UNKNOWN   # an unquoted unknown element: how many words is unknown
                return
            old = path.vars.get(name) if append else ()
            if old is None:
                path.vars[name] = UNKNOWN
                return
            path.vars[name] = (old if isinstance(old, tuple) else (old,)) + tuple(items)
            return
        text = self.scalar(path, value)
        if append and text is not None:
            old = self.var(path, name)
            text = None if old is None else (old if isinstance(old, str) else " ".join(old)) + text
        path.vars[name] = text

    def run_simple(self, node: Simple, paths: list[Path]) -> list[Path]:
        out = []
        for path in paths:
            if not node.words:
                for name, value, append in node.assigns:
                    self.assign(path, name, value, append)
                path.status = True if not any(
                    isinstance(v, Word) and any(p.kind == "sub" for p in v.pieces) for _n, v, _a in node.assigns) \
                    else "assumed"
                out.append(path)
                continue
            words: list[str] = []
            for word in node.words:
                words += self.expand(path, word)
            out += self.command(path, node, words)
        return out

    def command(self, path: Path, node: Simple, words: list[str]) -> list[Path]:
        line = self.outer_line or node.line
        if not words:
            path.status = True
            return [path]
        head = words[0]
        path.status = "assumed"
        if head == "return" and self.in_function:
            path.ended = "return"
            return [path]
        if head in ("exit", "return"):
            code = words[1] if len(words) > 1 else "0"
            if not path.ghost:
                path.ghost = f"`{' '.join(words[:2])}` on line {line} ends the script before it"
                path.exit_code = code if code.isdigit() else "?"
            return [path]
        if head in ("true", ":"):
            path.status = True
        elif head == "false":
            path.status = False
        elif head in ("[", "[[", "test"):
            path.status = self.test(path, words)
        elif head == "set":
            for w in words[1:]:
                if w.startswith("-") and "e" in w.lstrip("-") and w != "-o":
                    path.errexit = True
                elif w.startswith("+") and "e" in w.lstrip("+"):
                    path.errexit = False
            if "errexit" in words:
                path.errexit = "-o" in words
            path.status = True
        elif head in ("export", "declare", "local", "readonly", "typeset"):
            for w in words[1:]:
                name, eq, value = w.partition("=")
                if re.fullmatch(r"[A-Za-z_]\w*", name):
                    if eq:
                        path.vars[name] = None if "$" in value else value
                    if head == "export":
                        path.exported.add(name)
            for name, value, append in node.assigns:
                self.assign(path, name, value, append)
            path.status = True
        elif head == "unset":
            for w in words[1:]:
                if not w.startswith("-"):
                    path.vars[w] = ""
            path.status = True
        elif head in READERS:
            for w in words[1:]:
                if re.fullmatch(r"[A-Za-z_]\w*", w):
                    path.vars[w] = UNKNOWN
        elif head in ("source", "."):
            path.tainted = True
        elif head == "eval":
            return self.nested(path, " ".join(words[1:]), line, same_env=True)
        elif head in path.funcs and self.depth < MAX_DEPTH:
            return self.call_function(path, path.funcs[head], words[1:], line)
        else:
            inner = _inner_script(words)
            self.runs.append(Run(tuple(words), line, frozenset(path.maybe), path.ghost))
            if inner is not None:
                script, transparent = inner
                for p in self.nested(path.copy(), script, line, same_env=transparent, subshell=True):
                    pass
                path.status = "assumed"
        return [path]

    def call_function(self, path: Path, func: FuncDef, args: list[str], line: int) -> list[Path]:
        saved_args, saved_flag = path.args, self.in_function
        path.args = tuple(args)
        self.depth += 1
        self.in_function = True
        try:
            results = self.run_list(func.body, [path])
        finally:
            self.depth -= 1
            self.in_function = saved_flag
        for p in results:
            p.args = saved_args
            if p.ended == "return":
                p.ended = ""
        return results

    def nested(self, path: Path, script: str, line: int, *, same_env: bool, subshell: bool = False) -> list[Path]:
        """Re-read ``script`` (``eval``; ``bash -c``): same variables for eval; for a child shell only what
        was exported (a container's shell (``docker exec``): anything unset is unknown)."""
        if self.depth >= MAX_DEPTH:
            return [path]
        inner = path.copy() if subshell else path
        if subshell:
            inner.vars = {k: v for k, v in path.vars.items() if k in path.exported}
            inner.tainted = path.tainted or not same_env
            inner.args = ()
        saved_line, self.outer_line = self.outer_line, self.outer_line or line
        self.depth += 1
        try:
            results = self.run_list(parse(script), [inner])
        finally:
            self.depth -= 1
            self.outer_line = saved_line
        if subshell:
            path.status = "assumed"
            return [path]
        return results

    def test(self, path: Path, words: list[str]) -> object:
        """``[ ... ]`` / ``[[ ... ]]`` / ``test ...``: True, False or None (unknown)."""
        args = words[1:]
        if words[0] == "[" and args[-1:] == ["]"] or words[0] == "[[" and args[-1:] == ["]]"]:
            args = args[:-1]
        known = [not _has_unknown(a) for a in args]
        return _test_expr(args, known, words[0] == "[[")


def _merge_equal(paths: list[Path]) -> list[Path]:
    """Paths in the same state whose conditions differ in one outcome only are one path (x or not x)."""
    merged = True
    while merged and len(paths) > 1:
        merged = False
        for i, a in enumerate(paths):
            for j in range(i + 1, len(paths)):
                b = paths[j]
                diff = set(a.maybe) ^ set(b.maybe)
                if len(diff) == 2 and len({d for d, _s in diff}) == 1 and a.same_state(b) and a.status == b.status:
                    a.maybe = tuple(x for x in a.maybe if x not in diff)
                    del paths[j]
                    merged = True
                    break
            if merged:
                break
    return paths


def _chain_decision(op: str, status: object) -> bool | None:
    """Whether the command after ``op`` runs, given the status before it (None: known at run time)."""
    if op == "":
        return True
    if op == "&&":
        return True if status in (True, "assumed") else False if status is False else None
    return True if status is False else False if status is True else None


UNKNOWN_MARK = re.compile(r"\$\{\{|\$\(|\$[A-Za-z_{]|`")


def _has_unknown(word: str) -> bool:
    return bool(UNKNOWN_MARK.search(word))


def _test_expr(args: list[str], known: list[bool], double: bool) -> bool | None:
    """A test expression, three-valued; ``&&``/``||``/``-a``/``-o``/``!`` and the common operators."""
    for ops in (("||", "-o"), ("&&", "-a")):
        for k in range(len(args) - 1, -1, -1):
            if args[k] in ops and known[k] and 0 < k < len(args) - 1:
                left = _test_expr(args[:k], known[:k], double)
                right = _test_expr(args[k + 1:], known[k + 1:], double)
                if ops[0] == "||":
                    return True if True in (left, right) else False if left is False and right is False else None
                return False if False in (left, right) else True if left is True and right is True else None
    if args[:1] == ["!"]:
        inner = _test_expr(args[1:], known[1:], double)
        return None if inner is None else not inner
    if args[:1] == ["("] and args[-1:] == [")"]:
        return _test_expr(args[1:-1], known[1:-1], double)
    if len(args) == 1:
        return (args[0] != "") if known[0] else None
    if len(args) == 2 and args[0] in ("-n", "-z"):
        if not known[1]:
            return None
        return (args[1] != "") == (args[0] == "-n")
    if len(args) == 3 and args[1] in ("=", "==", "!=", "-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
        if not (known[0] and known[2]):
            return None
        a, op, b = args
        if op in ("=", "==", "!="):
            same = fnmatch.fnmatchcase(a, b) if double and any(c in b for c in "*?[") else a == b
            return same if op != "!=" else not same
        if not (re.fullmatch(r"-?\d+", a) and re.fullmatch(r"-?\d+", b)):
            return None
        x, y = int(a), int(b)
        return {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
    if not args:
        return False
    return None   # file tests, regex matches, string order: known only at run time


def _cond_text(cond: list) -> str:
    words = []
    for node in cond:
        if isinstance(node, AndOr):
            for _op, pipeline in node.items:
                for c in pipeline:
                    if isinstance(c, Simple):
                        words += [w.raw for w in c.words]
    return " ".join(words)[:80]


def _source(piece: Piece) -> str:
    if piece.kind == "var":
        return "${" + piece.text + "}"
    if piece.kind == "expr":
        return "${{ " + piece.text + " }}"
    return piece.text


def _inner_script(words: list[str]) -> tuple[str, bool] | None:
    """``[wrapper ...] bash -c SCRIPT``: (SCRIPT, whether it runs in this machine's environment)."""
    for i, word in enumerate(words[:-1]):
        if word.rpartition("/")[2] in SHELLS and C_FLAGS.match(words[i + 1]) and i + 2 < len(words):
            prefix = [w.rpartition("/")[2] for w in words[:i]]
            transparent = all(w in TRANSPARENT or w.startswith("-") or w.isdigit() or re.fullmatch(r"\d+[smh]?", w)
                              or "=" in w for w in prefix)
            return words[i + 2], transparent
    return None


@dataclass(frozen=True)
class Reading:
    runs: tuple[Run, ...]
    whys: dict[int, str]   # decision id -> the construct it hangs on

    def state(self, runs: list[Run]) -> tuple[str, str]:
        """("run" | "maybe" | "never", why) of a command reached as each of ``runs`` (e.g. every run of
        one suite): run when the paths that reach it cover every outcome of the conditions they took."""
        live = [r for r in runs if not r.never]
        if not live:
            return ("never", runs[0].never) if runs else ("never", "")
        known = resolve([r.decisions for r in live])
        smallest = min(known, key=len)
        if not smallest:
            return "run", ""
        return "maybe", "; ".join(dict.fromkeys(self.whys[d] for d, _side in sorted(smallest)))


def resolve(sets: list[frozenset[Decision]]) -> set[frozenset[Decision]]:
    """The paths (each a set of condition outcomes) closed under resolution (``{x} + {not x} -> {}``):
    the empty set is in it when the paths together cover every outcome."""
    known = set(sets)
    if frozenset() in known:
        return known
    for _ in range(64):
        new = set()
        items = list(known)
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                diff = a ^ b
                if len(diff) == 2:
                    (d1, s1), (d2, s2) = sorted(diff)
                    if d1 == d2 and s1 != s2:
                        new.add(a & b)
        if new <= known or len(known) > 256:
            return known
        known |= new
        if frozenset() in new:
            return known
    return known


def read_runs(script: str, env: ShellEnv = ShellEnv()) -> Reading:
    """Every simple command of ``script`` (its ``${{ }}`` already substituted) and where it is reached."""
    ev = Evaluator(env)
    try:
        ev.run_list(parse(script), [Path()])
    except RecursionError:   # nesting deeper than Python's stack: every command is a maybe
        why = "the script nests deeper than the reader follows"
        return Reading(tuple(Run(c.words, c.line, frozenset({(0, True)})) for c in split_commands(script) if c.words),
                       {0: why})
    return Reading(tuple(ev.runs), ev.whys)


def substitute(script: str, value: Callable[[str], str | None]) -> str:
    """``script`` with each ``${{ body }}`` whose ``value(body)`` is known replaced by it (others kept)."""
    def repl(m: re.Match) -> str:
        got = value(m.group(1).strip())
        return m.group(0) if got is None or "${{" in got else got
    return re.sub(r"\$\{\{(.*?)\}\}", repl, script, flags=re.S)
