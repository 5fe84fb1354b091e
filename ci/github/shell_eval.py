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
from functools import partial
from typing import Callable

from ci.github.shell import split_commands
from ci.numbers import whole_number
from ci.github.shell_syntax import AndOr, Case, FuncDef, Group, If, Loop, Piece, Refused, Simple, Word, parse

MAX_PATHS = 32        # live paths through one script; past it, unknown branches merge (variables -> unknown)
MAX_STEPS = 20000     # statements per reading past which paths merge into one and loops are not unrolled
MAX_READ_STEPS = 100_000   # statements per reading past which it stops: every command of the script a maybe
MAX_VALUE_CHARS = 65536    # a variable's value or an expanded word; a longer one is unknown
MAX_NESTED_CHARS = 1 << 20   # text parsed again per reading (eval, bash -c, source), past which it stops
NESTED_CHARS_A_STEP = 64     # what that text costs against the shared StepBudget
MAX_LOUD = 64          # the loud endings a reading keeps (more: fewer outcomes covered, never a false run)
MAX_DEPTH = 6         # nested bash -c / eval / function calls
UNKNOWN = None
SHELLS = ("bash", "sh", "zsh", "dash")
# commands that run the rest of their words as a command in the same environment
TRANSPARENT = frozenset({"sudo", "env", "nice", "nohup", "time", "timeout", "stdbuf", "exec", "command",
                         "xargs", "setsid", "numactl", "taskset", "ionice", "unbuffer"})
READERS = frozenset({"read", "mapfile", "readarray", "getopts"})


Decision = tuple[int, bool]   # (id of a condition known only at run time, the side this path took)
FAILED = "failed"             # status: the judged runner call failed (its exit code is FAIL_CODE)
FAIL_CODE = "<runner-status>"   # the judged runner's non-zero exit code, as `$?` / `exit $rc` carry it


class StepBudget:
    """Statements left to every reading of one audit (shared: scripts x matrix rows x judged calls)."""

    def __init__(self, steps: int):
        self.left = steps


class _OutOfSteps(Exception):
    """A reading stopped at a step budget; the message says which."""


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
    errexit: bool = True           # the step's shell runs with -e (GitHub's default `bash -e {0}`)
    pipefail: bool = False         # ... and with -o pipefail (`shell: bash`)
    no_errexit_why: str = ""       # why errexit is off from the start (the shell template), for messages
    workdir: str = ""              # the step's working-directory, relative to the tree ("" the root)

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
    pipefail: bool = False
    errexit_why: str = ""           # what turned errexit off, or made it unknown (errexit None)
    aliases: dict[str, str] = field(default_factory=dict)   # alias name -> where it was set
    traps: tuple[tuple[str, str], ...] = ()   # (EXIT | ERR, handler text)
    cwd: str | None = ""            # directory relative to the step's start (None: unknown after `cd $X`)
    failing: bool = False           # the judged runner call failed on this path (see :func:`judge_call`)
    fail_ctx: str = ""              # why that failure did not end the script where it happened
    local_names: frozenset[str] = frozenset()   # names `local` made in the function being run
    # how many times this path has read each run-time condition's place (a function called again, a loop's
    # next pass): each reading is a condition of its own, since what it tests may have changed in between
    reads: dict[tuple[int, int], int] = field(default_factory=dict)

    def copy(self) -> "Path":
        return Path(dict(self.vars), set(self.exported), dict(self.funcs), self.args, self.errexit, self.maybe,
                    self.ghost, self.ended, self.exit_code, self.status, self.tainted, self.pipefail,
                    self.errexit_why, dict(self.aliases), self.traps, self.cwd, self.failing, self.fail_ctx,
                    self.local_names, self.reads)   # reads: shared, replaced (never changed) by fork

    def same_state(self, other: "Path") -> bool:
        return (self.vars, self.exported, self.errexit, self.tainted, self.ghost, self.ended, set(self.funcs),
                self.pipefail, self.aliases, self.traps, self.cwd, self.failing, self.local_names) == \
            (other.vars, other.exported, other.errexit, other.tainted, other.ghost, other.ended, set(other.funcs),
             other.pipefail, other.aliases, other.traps, other.cwd, other.failing, other.local_names)


class Evaluator:
    def __init__(self, env: ShellEnv, fails: Callable[[int, tuple[str, ...]], bool] | None = None,
                 source: Callable[[str], str | None] | None = None, budget: StepBudget | None = None):
        self.env = env
        self.budget = budget          # shared by every reading of one audit (None: only MAX_READ_STEPS)
        self.fails = fails            # judging one runner call: (line, words) -> it is that call (it fails)
        self.source = source          # reads a sourced file of the tree (None: not read)
        self.exempt: list[str] = []   # why `set -e` does not apply here (left of &&/||, a condition, `!`)
        self.sub_depth = 0            # inside a subshell or child shell: `exit` ends only that
        # `( ! cmd )`, the subshell's one command: (its sub_depth, the and-or list, its line). Bash (5.2) then lets
        # `set -e` apply inside cmd, and a stop it makes leaves the subshell with status 0 (the `!` inverts it)
        self.bare_negation: tuple[int, AndOr, int] | None = None
        self.loops = 0                # enclosing loops (break / continue)
        self.outcomes: list[tuple[str, str]] = []   # judging: ("loud" | "masked" | "unknown", why) per path
        self.loud: set[frozenset[Decision]] = set()   # the conditions of paths that end the script loudly
        self.runs: list[Run] = []
        self.steps = 0
        self.nested_chars = 0   # text read again (eval, bash -c, source): bounded by MAX_NESTED_CHARS
        self.depth = 0
        self.outer_line = 0   # inside bash -c / eval: the outer command's line
        # (EXIT | ERR, handler) -> the line of the first `trap` that set it: a handler's commands are reported
        # (and judged) at that line, wherever the script happens to end
        self.trap_lines: dict[tuple[str, str], int] = {}
        self.whys: dict[int, str] = {}
        self.decision_ids: dict[object, int] = {}   # the inverse of whys, keyed by text or by site
        self.sites: list[object] = []   # the nodes whose id() keys a decision, held so no id is reused
        self.in_function = False
        self.in_source = False   # reading a sourced file (not in a function it defines)
        self.in_condition = 0   # inside an if/while condition
        self.suspended = 0      # inside a condition, left of &&/||, under `!`: set -e does not apply (bash ignores
                                # it in everything these contain, subshells and functions too; not in child shells)
        self.silent = 0         # inside a subshell whose failure may not reach the script's status (a non-last part
                                # of a pipeline without pipefail, a background job, a subshell where set -e is off or
                                # an EXIT/ERR trap may replace the code): an `exit 1` there is not loud
        self.max_paths = MAX_PATHS

    def condition(self, cond: list, path: Path, what: str = "if", line: int = 0) -> list[Path]:
        self.in_condition += 1
        self.suspended += 1
        self.exempt.append(f"it is in the condition of `{what}` on line {line}, where a failure is a branch")
        try:
            return self.run_list(cond, [path])
        finally:
            self.in_condition -= 1
            self.suspended -= 1
            self.exempt.pop()

    def decision(self, why: str, site: tuple | None = None, nth: int = 0) -> int:
        """The id of a run-time condition; the same construct read on two paths is the same condition.
        ``site``: (node, index) of the construct, ``nth``: which reading of it on the path (the first is 0);
        without a site the text ``why`` names the condition."""
        key: object = why
        if site is not None:   # the node's identity, not its text: two arms or clauses may read alike
            node, index = site
            key = (id(node), index, nth)
            if (id(node), index, 0) not in self.decision_ids and key not in self.decision_ids:
                self.sites.append(node)
        did = self.decision_ids.setdefault(key, len(self.whys))   # a dict: thousands of conditions stay linear
        self.whys[did] = why
        return did

    def fork(self, path: Path, why: str, taken_side: Callable[[Path], list[Path]], merge: bool = True,
             site: tuple | None = None, skip_status: object = "same") -> list[Path]:
        """A condition known only at run time: ``path`` both takes ``taken_side`` and skips it. A taken
        side that fails loudly (``exit 1``) is dropped; one that leaves the state and the status as the
        skipping side has them merges back, when ``merge`` (the skipping side goes on to the same place: not
        to an `else`). ``skip_status``: the status the skipping side has there when it is not ``path``'s
        now (an ``if`` whose branch did not run returns 0, whatever its condition returned). ``site``: the
        construct's (node, index), which names the condition (see ``decision``)."""
        if path.ghost:   # a path that cannot happen does not branch: it only records what it reaches
            return taken_side(path)
        nth = 0
        if site is not None:
            place = (id(site[0]), site[1])
            nth = path.reads.get(place, 0)
            path.reads = {**path.reads, place: nth + 1}   # a new dict: copies of the path share the old one
        did = self.decision(why, site, nth)
        taken = path.copy()
        taken.maybe += ((did, True),)
        results = taken_side(taken)
        kept = [r for r in results if not (r.ghost and r.exit_code not in ("", "0") and r.exit_code.isdigit()
                                           and not self.silent)]
        if merge:   # a side that ends in another status is another path: `case ... esac || RUN` reads it
            skipped = path.status if skip_status == "same" else skip_status
            kept = [r for r in kept if not (r.same_state(path) and not r.ghost and r.status == skipped)]
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
            k = _small_int(inner)
            if k is None:   # a crafted position past any argument list, or digits int() does not read
                return UNKNOWN
            return path.args[k - 1] if 0 < k <= len(path.args) else ""
        if inner == "?" and self.fails is not None:
            return _status_code(path.status)
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
                k = _small_int(index)
                got = UNKNOWN if k is None else value[k] if k < len(value) else ""
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
        size = 0
        for piece in word.pieces:
            value = self.piece_value(path, piece)
            size += len(value) + sum(map(len, value)) if isinstance(value, list) else len(value or "")
            if size > MAX_VALUE_CHARS:   # past the cap a value is unknown: its source text stands for it
                value = UNKNOWN
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
        size = 0
        for piece in word.pieces:
            value = self.piece_value(path, piece)
            if value is None:
                return None
            out.append(" ".join(value) if isinstance(value, list) else value)
            size += len(out[-1])
            if size > MAX_VALUE_CHARS:
                return None
        return "".join(out)

    # ---- statements ----
    def run_list(self, nodes: list, paths: list[Path], tail: bool = False) -> list[Path]:
        """``tail``: the list ends the script (its last command's status is the script's exit status)."""
        for n, node in enumerate(nodes):
            live = [p for p in paths if not p.ended]
            if not live:
                break
            done = [p for p in paths if p.ended]
            paths = self.limit(done + self.run_node(node, live, tail and n == len(nodes) - 1))
        return paths

    def limit(self, paths: list[Path]) -> list[Path]:
        """At most MAX_PATHS live paths and one ghost path per exit code (enough to report what never runs and
        what a subshell's status can be), and one more when only that one carries the judged runner's failure."""
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
                # what differs between the merged paths is unknown, never the first one's (a success or a
                # failure that only one path had would read as every path's)
                if merged.status != other.status:
                    merged.status = None
                if merged.errexit != other.errexit:
                    merged.errexit = None
                    merged.errexit_why = merged.errexit_why or other.errexit_why or "paths merged with and without -e"
                if other.failing and not merged.failing:
                    merged.failing, merged.fail_ctx = True, other.fail_ctx
            did = self.decision(f"more than {MAX_PATHS} paths through the script: the reader stops following them")
            merged.maybe = ((did, True),)
            live = [merged]
        # one ghost per exit code (a subshell's status reads them all: `( [ -f x ] && exit 0; false )` is not a
        # command that always fails), and the first that carries the judged runner's failure
        kept: dict[str, Path] = {}
        for g in ghosts:
            kept.setdefault(g.exit_code, g)
        out = list(kept.values())
        failing = next((g for g in ghosts if g.failing), None)
        if failing is not None and not any(g.failing for g in out):
            out.append(failing)
        return live + out

    def spend(self, steps: int) -> None:
        if self.budget is not None:
            self.budget.left -= steps
            if self.budget.left < 0:
                raise _OutOfSteps("the audit's budget of steps for reading scripts is spent")

    def run_node(self, node, paths: list[Path], tail: bool = False) -> list[Path]:
        self.steps += 1
        if self.steps > MAX_READ_STEPS:
            raise _OutOfSteps("the script takes more steps than the reader follows")
        self.spend(1)
        if self.steps > MAX_STEPS and self.max_paths > 1:   # past the budget: one path, every run a maybe
            self.max_paths = 1
            did = self.decision("the script is longer than the reader follows")
            for p in paths:
                p.maybe += ((did, True),)
            paths = self.limit(paths)
        if isinstance(node, Refused):   # a syntax error: bash exits 2 here, unless the lenient reading is right
            why = f"bash may refuse the script at line {node.line}: {node.why}"
            return [q for p in paths for q in self.fork(p, why, lambda r: self.refused(r, why, node.line),
                                                        site=(node, 0))]
        if isinstance(node, AndOr):
            if node.background:
                foreground = AndOr(node.items, node.negate, node.line)
                return [self.background(p, lambda q: self.run_and_or(foreground, [q]),
                                        f"`&` on line {node.line} runs it in the background") for p in paths]
            return self.run_and_or(node, paths, tail)
        if isinstance(node, If):
            return self.run_if(node, paths, tail)
        if isinstance(node, Loop):
            return self.run_loop(node, paths)
        if isinstance(node, Case):
            return self.run_case(node, paths, tail)
        if isinstance(node, Group):
            if node.subshell:
                return [self.scoped(p, lambda q: self.run_subshell_body(node, q, tail), self.unchecked(p))
                        for p in paths]
            return self.run_list(node.body, paths, tail)
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

    def run_subshell_body(self, node: Group, path: Path, tail: bool) -> list[Path]:
        """A subshell's commands (inside ``scoped``); ``( ! cmd )`` alone is read as bash runs it (bare_negation)."""
        [only] = node.body if len(node.body) == 1 else [None]
        if not (isinstance(only, AndOr) and len(only.items) == 1 and only.negate[0] and not only.background):
            return self.run_list(node.body, [path], tail)
        saved, self.bare_negation = self.bare_negation, (self.sub_depth, only, node.line)
        try:
            return self.run_list(node.body, [path], tail)
        finally:
            self.bare_negation = saved

    def unchecked(self, path: Path) -> bool:
        """Whether a subshell started here may fail without failing the script: set -e is off or ignored
        here, or an EXIT or ERR trap may replace the code."""
        return bool(self.suspended or path.errexit is not True or path.traps)

    def scoped(self, path: Path, body: Callable[[Path], list[Path]], silent: bool = True) -> Path:
        """Run ``body`` on a copy (a subshell): an exit inside ends only it; variables do not leak.
        ``silent``: the subshell's failure may not reach the script's status (see ``self.silent``)."""
        inner = path.copy()
        inner.traps = ()   # a subshell does not run its parent's EXIT trap
        self.sub_depth += 1
        self.silent += silent
        try:
            results = body(inner)
        finally:
            self.sub_depth -= 1
            self.silent -= silent
        statuses = {_result_status(r) for r in results}
        status = statuses.pop() if len(statuses) == 1 else None
        if any(r.ended for r in results):
            status = None
        path.status = status
        self.carry_failure(path, results, status)
        self.child_exit_trap(path, results)
        return path

    def child_exit_trap(self, path: Path, results: list[Path]) -> None:
        """A subshell or child shell that set its own EXIT trap: its handler runs when it ends (not followed).
        Its `exit` replaces any status (``( trap 'exit 1' EXIT ) || RUN`` runs RUN); a command in it that
        fails where `set -e` is on replaces a success. Either makes the status unknown."""
        for r in results:
            handler = dict(r.traps).get("EXIT")
            if handler is None:
                continue
            may_exit = bool(re.search(r"\bexit\b", handler) or handler.split()[:1] and handler.split()[0] in r.funcs)
            if path.failing and may_exit:
                path.status = None
                path.fail_ctx = path.fail_ctx or f"the EXIT trap `{handler[:40]}` of a subshell may set its status"
                return
            if not path.failing and path.status is not None and (
                    may_exit or r.errexit is not False and not _always_succeeds(handler)):
                path.status = None
                return

    def carry_failure(self, path: Path, results: list[Path], status: object) -> None:
        """A subshell or child shell whose judged runner call failed: the failure reaches ``path`` only
        as its status; when that status is not the failure, say why."""
        failed = [r for r in results if r.failing]
        if self.fails is None or not failed or path.failing:
            return
        path.failing = True
        if status != FAILED and not path.fail_ctx:
            path.fail_ctx = next((r.fail_ctx for r in failed if r.fail_ctx), "")
        elif status == FAILED and self.exempt and not path.fail_ctx:   # `( RUN ) || echo failed`
            path.fail_ctx = self.exempt[-1]
    def run_and_or(self, node: AndOr, paths: list[Path], tail: bool = False) -> list[Path]:
        out: list[Path] = []
        last_n = len(node.items) - 1
        for path in paths:
            current = [path]
            ran_last: set[int] = set()
            for n, (op, pipeline) in enumerate(node.items):
                nxt: list[Path] = []
                text = " ".join([f"{a[0]}=..." for c in pipeline if isinstance(c, Simple) for a in c.assigns]
                                + [w.raw for c in pipeline if isinstance(c, Simple) for w in c.words])[:60]
                pushed = 0
                # the list's last pipeline: a failure there ends the script under set -e (inside a fork's
                # taken side, so that a side that always fails loudly is dropped there)
                run = self.run_pipeline if n < last_n else partial(self.run_last_pipeline, line=node.line)
                if n < last_n:
                    self.exempt.append(f"it is on the left of `{node.items[n + 1][0]}` on line {node.line}, "
                                       "where `set -e` does not apply")
                    pushed += 1
                if node.negate[n] and not (self.bare_negation and self.bare_negation[1] is node):
                    self.exempt.append(f"`!` on line {node.line} negates it")
                    pushed += 1
                self.suspended += pushed
                for p in current:
                    if p.ended:
                        nxt.append(p)
                        continue
                    decide = _chain_decision(op, p.status, tail)
                    if decide is True:
                        got = run(pipeline, [p], node.negate[n])
                        if n == last_n:
                            ran_last |= {id(q) for q in got}
                        nxt += got
                    elif decide is False:
                        ghost = p.copy()
                        ghost.ghost = ghost.ghost or f"`{op} {text}` on line {node.line} is never reached"
                        self.run_pipeline(pipeline, [ghost], node.negate[n])
                        nxt.append(p)
                    else:
                        why = (f"`{op} {text}` on line {node.line} runs only if the command before it "
                               f"{'succeeds' if op == '&&' else 'fails'}, known at run time")
                        got = self.fork(p, why, lambda q: run(pipeline, [q], node.negate[n]), site=(node, n))
                        if n == last_n:
                            ran_last |= {id(q) for q in got[1:]}
                        nxt += got
                for _ in range(pushed):
                    self.exempt.pop()
                self.suspended -= pushed
                current = self.limit(nxt)
            last = node.items[-1][1]
            if not self.suspended and not node.negate[-1]:
                # a command that may fail ends this subshell under set -e, and nothing reads that failure; or it
                # ends the script through a trap, whose handler may exit 0 (`trap 'exit 0' EXIT`)
                why = (f"`{text}` on line {node.line} may fail, which ends its subshell silently under `set -e` "
                       "(nothing reads the subshell's status)")
                nxt = []
                for p in current:
                    may_fail = id(p) in ran_last and p.status in ("assumed", None) and p.errexit is not False \
                        and not p.ended and not p.ghost
                    if may_fail and self.silent:
                        nxt += self.fork(p, why, lambda q: self.silent_exit(q, why, node.line), site=(node, -1))
                    elif may_fail and p.traps:
                        trap_why = (f"`{text}` on line {node.line} may fail, which ends the "
                                    f"{'subshell' if self.sub_depth else 'script'} under `set -e` through its trap "
                                    f"`{p.traps[0][1][:40]}`")
                        nxt += self.fork(p, trap_why, lambda q, w=trap_why: self.trapped_exit(q, w, node.line),
                                         site=(node, -2))
                    elif id(p) in ran_last and p.status in ("assumed", None) and p.errexit is False \
                            and not p.ended and not p.ghost and "ERR" in dict(p.traps):
                        # bash runs the ERR trap on a failure whether or not `set -e` is on (`trap 'exit 0' ERR;
                        # set +e; ...; false` exits 0)
                        err_why = (f"`{text}` on line {node.line} may fail, which runs the ERR trap "
                                   f"`{dict(p.traps)['ERR'][:40]}`")
                        nxt += self.fork(p, err_why, lambda q: self.err_trap_only(q, node.line), site=(node, -3))
                    else:
                        nxt.append(p)
                current = self.limit(nxt)
            # a compound command other than a subshell (`{ }`, if, case, a loop) that returns the failure of a
            # command where `set -e` was ignored does not end the script either: a failure where it applied
            # ended the path inside already
            exempt_compound = len(last) == 1 and (isinstance(last[0], (If, Case, Loop)) or
                                                  isinstance(last[0], Group) and not last[0].subshell)
            if self.fails is not None and not node.negate[-1]:
                for p in current:   # the judged runner failed as the list's last command: `set -e` applies
                    if exempt_compound and p.status == FAILED and id(p) in ran_last and not p.ended \
                            and not p.ghost:
                        p.fail_ctx = p.fail_ctx or f"the compound command on line {node.line} returns a failure " \
                            "where `set -e` was ignored, which does not end the script"
                        continue
                    if p.status == FAILED and id(p) in ran_last and not p.ended and not p.ghost:
                        self.errexit_fail(p, node.line)
            out += current
        return out

    def run_last_pipeline(self, pipeline: list, paths: list[Path], negate: bool, line: int) -> list[Path]:
        """The last pipeline of an and-or list (``A``, ``A && B``, ``A || B``): under set -e, where it is
        not exempt, a last pipeline that always fails ends the script: a simple command, a pipeline of
        several parts, a subshell (``|| (echo failed; exit 1)``). Another compound command (``{ }``, if,
        case, a loop) whose status is a failure set -e ignored inside does not (bash's manual, ``set -e``)."""
        paths = self.run_pipeline(pipeline, paths, negate)
        checked = len(pipeline) > 1 or len(pipeline) == 1 and (
            isinstance(pipeline[0], Simple) or isinstance(pipeline[0], Group) and pipeline[0].subshell)
        if checked and not negate and not self.suspended:
            for p in paths:
                if p.errexit is True and p.status is False and not p.ended and not p.ghost:
                    self.always_fails(p, line)
                elif p.errexit is False and p.status is False and not p.ended and not p.ghost \
                        and "ERR" in dict(p.traps):   # the ERR trap runs without `set -e` too
                    self.err_trap_only(p, line)
        return paths

    def err_trap_only(self, path: Path, line: int) -> list[Path]:
        """A failure where `set -e` is off, with an ERR trap set: bash runs the handler, whose `exit` ends the
        script (through the EXIT trap); a handler that does not exit lets the script go on."""
        path.status = False
        handler = dict(path.traps).get("ERR")
        if handler is not None and self.depth < MAX_DEPTH:
            self.run_handler(path, handler, line)
        return [path]

    def refused_text(self, nodes: list, cut: int, path: Path, line: int) -> list[Path]:
        """``eval`` / ``source`` of text whose command ``nodes[cut + 1]`` bash refuses: what comes before runs,
        then the command returns 2 (``! eval 'if'`` is a success) or, if the lenient reading is right, the rest
        runs too."""
        before = self.run_list(nodes[:cut], [path])
        why = f"bash may refuse the text line {line} runs: {nodes[cut].why}"
        did = self.decision(why)
        refused = []
        for p in before:
            if not p.ghost and not p.ended:
                q = p.copy()
                q.status, q.maybe = False, q.maybe + ((did, True),)
                refused.append(q)
                p.maybe += ((did, False),)
        return refused + self.run_list(nodes[cut + 1:], before)

    def refused(self, path: Path, why: str, line: int) -> list[Path]:
        """Bash refuses the rest of the script: it exits with status 2, through the EXIT trap (which may
        turn that into a success: `trap 'exit 0' EXIT`)."""
        path.status = False
        self.end(path, "2", f"{why}, and bash exits with status 2", line)
        return [path]

    def always_fails(self, path: Path, line: int) -> None:
        """A command that always fails, where `set -e` applies: the ERR trap runs, then the script (or the
        subshell) ends, through its EXIT trap."""
        self.errexit_end(path, line, f"a command that always fails on line {line} ends the script under `set -e`")

    def errexit_end(self, path: Path, line: int, how: str) -> None:
        """A failure where `set -e` applies: the ERR trap runs, then the script (or the subshell) ends, through
        its EXIT trap (in a subshell, not followed: a subshell's own EXIT trap may set any code)."""
        handler = dict(path.traps).get("ERR")
        if handler is not None and self.depth < MAX_DEPTH:
            self.run_handler(path, handler, line)
            if path.ghost:
                return
            if path.ended:   # `return` in the ERR trap leaves the function: the script goes on
                path.status = None
                return
        self.end(path, "?" if self.sub_depth and "EXIT" in dict(path.traps) else "1", how, line, errexit=True)

    def trapped_exit(self, path: Path, why: str, line: int) -> list[Path]:
        """The side of a fork where a command that may fail did, under `set -e`, with a trap set."""
        path.status = False
        self.errexit_end(path, line, why)
        return [path]

    def silent_exit(self, path: Path, why: str, line: int) -> list[Path]:
        path.status = False
        self.end(path, "1", why, line, errexit=True)
        return [path]

    def errexit_fail(self, path: Path, line: int) -> None:
        """The judged runner's failure reached the end of a list: the ERR trap runs, then `set -e` ends the
        script (loud), unless the list is exempt or errexit is off, when the script goes on (say why)."""
        if self.exempt:
            path.fail_ctx = path.fail_ctx or self.exempt[-1]
            return
        handler = dict(path.traps).get("ERR")
        if handler is not None and self.depth < MAX_DEPTH:
            self.run_handler(path, handler, line)
            if path.ghost:
                return
            if path.ended:   # `return` in the ERR trap leaves the function: the script goes on
                path.status = None
                path.fail_ctx = path.fail_ctx or f"the ERR trap `{handler[:40]}` leaves the function at line {line}"
                return
        if path.errexit is True:
            self.end(path, FAIL_CODE, f"`set -e` ends the script at line {line}", line, errexit=True)
            return
        path.fail_ctx = path.fail_ctx or path.errexit_why or "errexit is off"

    def run_handler(self, path: Path, handler: str, line: int) -> None:
        """Run the ERR trap's handler on ``path``: its `exit` ends the script with its own code, through the
        EXIT trap (bash runs it there too); the ERR trap does not fire again inside its own handler."""
        saved, status = path.traps, path.status
        path.traps = tuple(t for t in saved if t[0] != "ERR")
        results = self.nested(path, handler, self.trap_lines.get(("ERR", handler), line), same_env=True)
        path.traps = saved
        if not path.ghost and not path.ended:   # a handler that returns leaves `$?` as the failure set it
            path.status = status
        for r in results:
            if r is not path and r.ghost:
                path.ghost, path.exit_code = r.ghost, r.exit_code

    def end(self, path: Path, code: str, how: str, line: int, errexit: bool = False) -> None:
        """``path`` leaves the script (or the subshell it is in) with ``code``: the EXIT trap runs first,
        and, judging a runner call, the outcome is recorded. ``errexit``: `set -e` stopped it."""
        if errexit and self.bare_negation and self.bare_negation[0] == self.sub_depth and not path.ghost:
            how = f"{how}, which leaves `( ! ... )` on line {self.bare_negation[2]} with status 0"
            code = "0"
            if path.failing and not path.fail_ctx:
                path.fail_ctx = how
        if self.sub_depth == 0 and not path.ghost:
            handler = dict(path.traps).get("EXIT")
            if handler is not None and self.depth < MAX_DEPTH:
                path.status = _code_status(code)
                trapped = path.copy()
                trapped.traps, trapped.failing = (), False
                results = self.nested(trapped, handler, self.trap_lines.get(("EXIT", handler), line),
                                      same_env=True)
                for r in results:   # the judged runner failed in the handler, which still ran to its end: bash
                    if r.failing and not r.ghost:   # exits with the status the script had before the trap
                        self.judge(r, code, f"it runs in the EXIT trap `{handler[:40]}`, which goes on past its "
                                            f"failure; {how}, the status bash exits with")
                exits = [r for r in results if r.ghost and r.exit_code]
                if exits:
                    code = exits[0].exit_code
                    how = f"{how}, then the EXIT trap `{handler[:40]}` exits {_shown(code)}"
            if path.failing:
                self.judge(path, code, how)
            if code.isdigit() and code != "0" and len(self.loud) < MAX_LOUD:
                self.loud.add(frozenset(path.maybe))
        path.ghost = path.ghost or how
        path.exit_code = code

    def fall_off_the_end(self, paths: list[Path]) -> None:
        """Paths that reach the script's last line: its last status is the step's, and the EXIT trap runs
        (a runner it calls is reached there, and its failure judged)."""
        for p in paths:
            if not p.ghost and not p.ended:
                code = _status_code(p.status) or "?"
                self.end(p, code, "the script then ends with status 0" if code == "0" else
                         "the script then ends with the status of a later command", 0)

    def judge(self, path: Path, code: str, how: str) -> None:
        if code == FAIL_CODE or (code.isdigit() and code != "0"):
            self.outcomes.append(("loud", ""))
            return
        kind = "masked" if code == "0" else "unknown"
        why = f"{path.fail_ctx}; {how}" if path.fail_ctx else how
        self.outcomes.append((kind, why + ("" if kind == "masked" else " (a code known only at run time)")))

    def run_pipeline(self, pipeline: list, paths: list[Path], negate: bool) -> list[Path]:
        if len(pipeline) > 1:   # each part runs in a subshell: an exit ends only that part
            for path in paths:
                statuses = []
                for k, part in enumerate(pipeline):
                    # an early part's failure reaches the script only through pipefail, and then only where set -e
                    # applies to the pipeline (`set +e; ( RUN; exit 3 ) | cat` goes on)
                    silent = self.unchecked(path) or (path.pipefail is not True and k < len(pipeline) - 1)
                    self.scoped(path, lambda q, part=part: self.run_node(part, [q]), silent)
                    statuses.append(path.status)
                # with pipefail, a part that always fails fails the pipeline
                path.status = False if path.pipefail is True and False in statuses else "assumed"
                if self.fails is not None:
                    failed = [s for s in statuses if s in (False, FAILED)]
                    path.status = failed[-1] if path.pipefail and failed else statuses[-1]
                    path.vars["PIPESTATUS"] = tuple(_status_code(s) or "?" for s in statuses)
                    if path.failing and FAILED in statuses[:-1] and path.status != FAILED and not path.fail_ctx:
                        tail = " ".join(w.raw for w in pipeline[-1].words[:2]) if isinstance(pipeline[-1], Simple) \
                            else "..."
                        path.fail_ctx = f"it is piped into `{tail}` without `set -o pipefail`"
        elif pipeline:
            paths = self.run_node(pipeline[0], paths)
            if self.fails is not None:
                for p in paths:
                    p.vars["PIPESTATUS"] = (_status_code(p.status) or "?",)
        if negate:
            for p in paths:
                if p.ended:   # `! return 1` leaves the function with 1: `!` never sees a status
                    continue
                p.status = {True: False, False: True, FAILED: True}.get(p.status, None)
        return paths

    def run_if(self, node: If, paths: list[Path], tail: bool = False) -> list[Path]:
        out: list[Path] = []
        for path in paths:
            out += self.run_clauses(node, 0, path, tail)
        for p in out:   # the status of the branch's last command, or 0 when no branch ran (not told apart here)
            if not p.ended and p.status not in (FAILED, True, "assumed"):
                p.status = None
        return self.limit(out)

    def run_clauses(self, node: If, k: int, path: Path, tail: bool = False) -> list[Path]:
        """Clause ``k`` of an ``if`` (then the elif/else after it) on one path."""
        if k == len(node.clauses):
            if not node.orelse:   # no branch ran: the if's status is 0, whatever its conditions returned
                path.status = True
                return [path]
            return self.run_list(node.orelse, [path], tail)
        cond, body = node.clauses[k]
        out: list[Path] = []
        for p in self.condition(cond, path, "elif" if k else "if", node.line):
            decided = p.status if p.status in (True, False) else None
            if p.status == FAILED:   # the judged runner as the condition: a failure takes the other branch
                decided, p.status = False, False
            if decided is True:
                out += self.run_list(body, [p], tail)
                skipped = p.copy()
                skipped.ghost = skipped.ghost or f"`{_cond_text(cond)}` on line {node.line} is always true"
                self.run_clauses(node, k + 1, skipped)
            elif decided is False:
                ghost = p.copy()
                ghost.ghost = ghost.ghost or f"`{_cond_text(cond)}` on line {node.line} is false"
                self.run_list(body, [ghost])
                out += self.run_clauses(node, k + 1, p, tail)
            else:
                why = f"`{_cond_text(cond)}` on line {node.line} is known only at run time"
                rest: list[Path] = []
                # with no clause left, the skipping side's `if` returns 0 (run_clauses past the last): a branch
                # that ends in a failure (`then ! RUN; fi && next`) is another path, not a merge
                forked = self.fork(p, why, lambda q: self.run_list(body, [q], tail),
                                   merge=k + 1 == len(node.clauses) and not node.orelse, site=(node, k),
                                   skip_status=True)
                taken = forked[1:]
                if p.ghost:
                    taken, rest = forked, [p.copy()]
                else:
                    rest = forked[:1]
                out += taken
                for q in rest:
                    out += self.run_clauses(node, k + 1, q, tail)
        return out

    def run_loop(self, node: Loop, paths: list[Path]) -> list[Path]:
        if node.kind != "for":   # each outcome of the condition is a path into the loop (or past it)
            paths = [q for p in paths for q in self.condition(node.cond, p, node.kind, node.line)]
        out = []
        for path in paths:
            if node.kind != "for":
                enters = {True: node.kind == "while", False: node.kind == "until",
                          FAILED: node.kind == "until"}.get(path.status)   # the judged runner fails every time
                if enters is False:   # the body never runs; the loop's status is 0
                    ghost = path.copy()
                    ghost.ghost = ghost.ghost or f"the `{node.kind}` condition on line {node.line} ends the loop " \
                                                 "before its body"
                    self.loop_body(node.body, [ghost])
                    path.status = True
                    out.append(path)
                    continue
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
                if items is not None and len(items) <= 16 and self.max_paths > 1:   # unrolled within MAX_STEPS
                    current, left = [path], []
                    for item in items:
                        for p in current:
                            p.vars[node.var] = item
                        current, stopped = _loop_exits(self.loop_body(node.body, current))
                        left += stopped
                        if not current:
                            break
                    out += current + left
                    continue
                why = f"`for {node.var} in ...` on line {node.line} loops over a list known only at run time" \
                    if items is None or len(items) > 16 else \
                    f"`for {node.var} in ...` on line {node.line} is past the steps the reader unrolls"
            else:
                why = f"the `{node.kind}` loop on line {node.line} runs a number of times known only at run time"
                if path.status == FAILED:   # `until RUNNER`: the status the body sees is no longer the runner's
                    path.status = None

            def body(q: Path) -> list[Path]:
                if node.kind == "for":
                    q.vars[node.var] = UNKNOWN
                current, stopped = _loop_exits(self.loop_body(node.body, [q]))
                results = current + stopped
                for r in results:   # a second pass could see other values: what the body assigns is unknown
                    for name in list(r.vars):
                        if path.vars.get(name, "\0") != r.vars[name]:
                            r.vars[name] = UNKNOWN
                return results
            got = self.fork(path, why, body, site=(node, 0))
            if node.kind != "for" and not path.ghost:   # no pass of the body: the loop's status is 0
                got[0].status = True
            out += got
        for p in out:
            if not p.ended and p.status != FAILED:
                p.status = "assumed"
        return self.limit(out)

    def loop_body(self, body: list, paths: list[Path]) -> list[Path]:
        self.loops += 1
        try:
            return self.run_list(body, paths)
        finally:
            self.loops -= 1

    def run_case(self, node: Case, paths: list[Path], tail: bool = False) -> list[Path]:
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
            if any(end != ";;" for end in node.ends) and not path.ghost:
                unknown = True   # `;&` / `;;&`: read as a case whose arm is known only at run time
            path.status = True   # no arm taken, or an empty one: the case's status is 0 (its word is read)
            if not unknown or path.ghost:
                for n, (_pats, body) in enumerate(node.arms):
                    if n == chosen:
                        out += self.run_list(body, [path], tail)
                    else:
                        ghost = path.copy()
                        ghost.ghost = ghost.ghost or f"`case {node.word.raw}` on line {node.line} never takes this arm"
                        self.run_list(body, [ghost])
                if chosen is None:
                    out.append(path)
                continue
            why = f"`case {node.word.raw}` on line {node.line} is known only at run time"
            if any(end != ";;" for end in node.ends):
                why = f"`case {node.word.raw}` on line {node.line} falls through (`;&` / `;;&`): known only at run time"
            rest = [path]
            for n, (pats, body) in enumerate(node.arms):
                nxt = []
                # an arm ending in `;&` runs the next arm's body too; `;;&` goes on testing the next patterns
                bodies = [body]
                k = n
                while k < len(node.ends) and node.ends[k] == ";&" and k + 1 < len(node.arms):
                    k += 1
                    bodies.append(node.arms[k][1])
                if any(_matches_anything(w) for w in pats):   # `*)`: every path still testing takes it
                    for q in rest:
                        got = self.run_list([b for group in bodies for b in group], [q], tail)
                        (nxt if n < len(node.ends) and node.ends[n] == ";;&" else out).extend(got)
                    rest = nxt
                    continue
                for q in rest:
                    forked = self.fork(q, why, lambda r, bodies=bodies: self.run_list(
                        [b for group in bodies for b in group], [r], tail), merge=n + 1 == len(node.arms),
                        site=(node, n))   # each arm its own condition
                    if n < len(node.ends) and node.ends[n] == ";;&":
                        nxt += forked[1:]
                    else:
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
            got = (old if isinstance(old, tuple) else (old,)) + tuple(items)
            path.vars[name] = got if len(got) + sum(map(len, got)) <= MAX_VALUE_CHARS else UNKNOWN
            return
        text = self.scalar(path, value)
        if append and text is not None:
            old = self.var(path, name)
            text = None if old is None else (old if isinstance(old, str) else " ".join(old)) + text
        path.vars[name] = text if text is None or len(text) <= MAX_VALUE_CHARS else UNKNOWN

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
            for word in node.words:
                for piece in word.pieces:
                    if piece.kind == "proc":
                        self.process_substitution(path, piece.text, self.outer_line or node.line)
            words: list[str] = []
            for word in node.words:
                words += self.expand(path, word)
            out += self.command(path, node, words)
        return out

    def background(self, path: Path, body: Callable[[Path], list[Path]], why: str) -> Path:
        """A subshell in the background (``coproc``, ``&``): set -e applies inside it, its status is never read."""
        self.exempt.append(f"{why}: its status is never read")
        saved = path.maybe
        path.maybe += ((self.decision(f"{why}: the script may end before it starts"), True),)
        try:
            self.scoped(path, body)
        finally:
            self.exempt.pop()
            path.maybe = saved
        if path.status == FAILED or path.failing:
            path.fail_ctx = path.fail_ctx or why
        path.status = True
        return path

    def process_substitution(self, path: Path, text: str, line: int) -> None:
        """``<(CMD)`` / ``>(CMD)``: CMD runs in a subshell beside the command, and its status is never read."""
        self.exempt.append(f"process substitution `{text[:2]}...)` on line {line}: its status is never read")
        try:
            self.scoped(path, lambda q: self.nested(q, text[2:-1], line, same_env=True))
        finally:
            self.exempt.pop()

    def command(self, path: Path, node: Simple, words: list[str]) -> list[Path]:
        line = self.outer_line or node.line
        if not words:
            path.status = True
            return [path]
        head = words[0]
        if head in ("builtin", "command") and len(words) > 1 and not words[1].startswith("-"):
            return self.command(path, node, words[1:])   # `builtin echo ...` is `echo ...`
        prior, path.status = path.status, "assumed"   # `$?` in a function body, `exit` alone: the status before
        if head == "return" and (self.in_function or self.in_source):
            path.ended = "return"   # its status is the call's (`return` alone: the last command's)
            code = _exit_code(words[1]) if len(words) > 1 else _status_code(prior)
            path.status = _code_status(code) if code else None
            return [path]
        if head == "return":   # outside a function or sourced file bash refuses it: a command that fails (2)
            path.status = False
            return [path]
        if head in ("exit", "return"):
            code = _exit_code(words[1]) if len(words) > 1 else (
                _status_code(prior) if self.fails is not None else "0")
            if not path.ghost:
                code = code or "?"
                self.end(path, code, f"`{' '.join(words[:2])}` on line {line} ends the script", line)
                path.ghost = f"`{' '.join(words[:2])}` on line {line} ends the script before it"
            return [path]
        if head in ("break", "continue"):
            if self.loops:
                given = _small_int(words[1]) if len(words) > 1 else None
                count = str(min(given, 1_000_000)) if given is not None and given > 0 else "1"
                path.ended = f"{head} {count}"
            path.status = True
            return [path]
        if head == "exec":
            rest = _exec_command(words[1:])
            if not rest:
                path.status = True   # `exec >log 2>&1`: redirections only, the shell goes on
                return [path]
            results = self.command(path, node, rest)   # the command replaces the shell: the script ends with it
            for p in results:
                if not p.ghost and not p.ended:
                    self.end(p, _status_code(p.status) or "?", f"`exec {rest[0]}` on line {line} replaces the shell",
                             line)
            return results
        if head == "coproc":
            words = words[1:]
            if not words:
                return [path]
            return [self.background(path, lambda q: self.command(q, node, words),
                                    f"`coproc` on line {line} runs it in the background")]
        if head in ("true", ":"):
            path.status = True
        elif head == "false":
            path.status = False
        elif head in ("[", "[[", "test"):
            path.status = self.test(path, words)
        elif head == "set":
            self.set_options(path, words, line)
            path.status = True
        elif head == "shopt":
            flags = "".join(w[1:] for w in words[1:] if w.startswith("-"))
            names = [w for w in words[1:] if not w.startswith("-")]
            if "o" in flags and ("s" in flags or "u" in flags):
                for name in names:
                    self.set_option(path, name, "s" in flags, f"`{' '.join(words[:3])}` on line {line}")
            path.status = True
        elif head == "alias":
            for w in words[1:]:
                name, eq, _value = w.partition("=")
                if eq and name:
                    path.aliases[name] = f"`alias {name}=...` on line {line}"
            path.status = True
        elif head == "hash" and "-p" in words[1:-1]:   # `hash -p FILE NAME`: NAME runs FILE from now on
            i = words.index("-p")
            for name in words[i + 2:]:
                path.aliases[name] = f"`hash -p {words[i + 1]}` on line {line}"
            path.status = True
        elif head == "trap":
            self.set_trap(path, words[1:], line)
            path.status = True
        elif head == "cd":
            path.cwd = _cd(path.cwd, words[1:])
        elif head in ("pushd", "popd"):
            path.cwd = None
        elif head in ("export", "declare", "local", "readonly", "typeset"):
            local = self.in_function and head in ("local", "declare", "typeset") and not any(
                w.startswith("-") and "g" in w for w in words[1:])
            for w in words[1:]:
                name, eq, value = w.partition("=")
                if re.fullmatch(r"[A-Za-z_]\w*", name):
                    if local:
                        path.local_names |= {name}
                    if eq:
                        path.vars[name] = None if "$" in value else value
                    if head == "export":
                        path.exported.add(name)
            for name, value, append in node.assigns:
                self.assign(path, name, value, append)
            path.status = True
        elif head == "unset":
            flags = "".join(w[1:] for w in words[1:] if w.startswith("-"))
            for w in words[1:]:
                if not w.startswith("-"):
                    # bash: -f a function; -v a variable; neither: the variable, else a function of that name
                    if "f" in flags or ("v" not in flags and w not in path.vars and w in path.funcs):
                        path.funcs.pop(w, None)
                    else:
                        path.vars[w] = ""
            path.status = True
        elif head == "kill" and any(w in ("0", "-0") or re.search(r"\$\{?(\$|BASHPID)\b|\$\{?\$\}", w)
                                    for w in words[1:]):
            # the script signals itself (or its group): a trap on that signal may exit, with any code
            self.unknown_code(path, f"`{' '.join(words[:3])}` on line {line} signals the script itself")
        elif head in READERS:
            for w in words[1:]:
                if re.fullmatch(r"[A-Za-z_]\w*", w):
                    path.vars[w] = UNKNOWN
        elif head in ("source", "."):
            return self.source_file(path, words, line)
        elif head == "eval":
            text = " ".join(words[1:])
            if _has_unknown(text):   # text known only at run time: what it does is unknown
                self.unknown_code(path, f"`eval {text[:40]}` on line {line} runs text known only at run time")
            return self.nested(path, text, line, same_env=True)
        elif head in path.funcs and self.depth < MAX_DEPTH:
            path.status = prior
            return self.call_function(path, path.funcs[head], words[1:], line)
        else:
            inner = _inner_script(words)
            decisions = frozenset(path.maybe)
            if head in path.aliases:   # an alias may replace the command (with `shopt -s expand_aliases`)
                decisions |= {(self.decision(f"{path.aliases[head]} may replace `{head}`"), True)}
            self.runs.append(Run(tuple(words), line, decisions, path.ghost))
            if self.fails is not None and not path.ghost and not path.failing and self.fails(line, tuple(words)):
                path.status = FAILED
                path.failing = True
                path.fail_ctx = self.exempt[-1] if self.exempt else (
                    "" if path.errexit is True else path.errexit_why or "errexit is off")
                if head == "find" and _find_exec_semicolon(words):   # find's status ignores `-exec ... ;`
                    path.status = True
                    path.fail_ctx = path.fail_ctx or f"`find ... -exec ... ;` on line {line} ignores its status"
                return [path]
            if inner is not None:
                script, transparent, errexit, pipefail = inner
                child = path.copy()
                child.errexit = errexit
                child.pipefail = pipefail
                child.errexit_why = "" if errexit else f"`{head} -c` on line {line} runs its script without `-e`"
                child.traps = ()
                # a child shell has only the functions exported to it (`export -f`)
                child.funcs = {k: v for k, v in child.funcs.items() if k in child.exported}
                results = self.nested(child, script, line, same_env=transparent, subshell=True,
                                      unchecked=self.unchecked(path))
                path.status = "assumed"
                self.carry_failure(path, results, _result_status(results[0]) if len(results) == 1 else None)
                if path.failing:
                    statuses = {_result_status(r) for r in results}
                    path.status = statuses.pop() if len(statuses) == 1 else None
                    self.child_exit_trap(path, results)
                    if head == "find" and _find_exec_semicolon(words):   # find ignores `-exec ... ;`'s status
                        path.status = True
                        path.fail_ctx = path.fail_ctx or f"`find ... -exec ... ;` on line {line} ignores its status"
        return [path]

    def set_options(self, path: Path, words: list[str], line: int) -> None:
        """``set -e``, ``set +o errexit``, ``set -eo pipefail``...; ``set -- ...`` sets arguments, not options."""
        where = f"`{' '.join(words[:3])}` on line {line}"
        i = 1
        while i < len(words):
            w = words[i]
            if _has_unknown(w):   # `set $(...)`, `set $OPTS`: options (even -n) known only at run time
                self.unknown_code(path, f"{where} sets options known only at run time")
                break
            if w in ("--", "-") or w[:1] not in ("-", "+") or len(w) < 2:
                break
            on = w[0] == "-"
            for ch in w[1:]:
                if ch == "e":
                    self.set_option(path, "errexit", on, where)
                elif ch == "n":
                    self.set_option(path, "noexec", on, where)
                elif ch == "o" and i + 1 < len(words):
                    i += 1
                    self.set_option(path, words[i], on, where)
            i += 1

    def set_option(self, path: Path, name: str, on: bool, where: str) -> None:
        if name == "errexit":
            path.errexit = on
            path.errexit_why = "" if on else f"{where} turns errexit off"
        elif name == "pipefail":
            path.pipefail = on
        elif name == "noexec" and on and not path.ghost:   # bash reads the rest and runs none of it
            how = f"{where} turns on noexec: bash runs no later command"
            self.end(path, "0", how, 0)
            path.ghost = how

    def set_trap(self, path: Path, args: list[str], line: int = 0) -> None:
        """``trap [--] HANDLER SIGNAL...`` (EXIT and ERR are kept; ``-`` resets; ``-p``/``-l`` list)."""
        if args[:1] == ["--"]:
            args = args[1:]
        if not args or args[0] in ("-p", "-l"):
            return
        if len(args) == 1:   # `trap SIGNAL`: reset
            handler, signals = "-", args
        else:
            handler, signals = args[0], args[1:]
        traps = dict(path.traps)
        for sig in signals:
            if sig.upper() in ("DEBUG", "RETURN") and handler not in ("-", ""):   # runs before each command
                self.unknown_code(path, f"`trap ... {sig}` on line {line} runs a handler the audit does not "
                                        "follow before later commands")
            name = {"0": "EXIT", "SIGEXIT": "EXIT", "EXIT": "EXIT", "ERR": "ERR", "SIGERR": "ERR"}.get(sig.upper())
            if name is None:
                continue
            if handler == "-":
                traps.pop(name, None)
            else:
                traps[name] = handler
                self.trap_lines.setdefault((name, handler), self.outer_line or line)
        path.traps = tuple(sorted(traps.items()))

    def unknown_code(self, path: Path, why: str) -> None:
        """Something the audit does not read ran in this shell: it may `exit` or change options, so what
        follows is reached only maybe, and errexit is unknown."""
        path.tainted = True
        path.maybe += ((self.decision(why), True),)
        if path.errexit is not False:
            path.errexit = None
            path.errexit_why = f"{why}: errexit may be off"

    def source_file(self, path: Path, words: list[str], line: int) -> list[Path]:
        """``source FILE`` / ``. FILE``: a file of the tree is read in this shell (bounded); any other
        (outside the tree, a path known only at run time, missing) makes what follows a maybe."""
        target = words[1] if len(words) > 1 else ""
        text = None
        if self.source is not None and target and not _has_unknown(target) and path.cwd is not None \
                and self.depth < MAX_DEPTH:
            text = self.source(_join(self.env.workdir, path.cwd, target))
        if text is None:
            self.unknown_code(path, f"`{' '.join(words[:2])[:60]}` on line {line} runs a file the audit does not "
                                    "read (it may exit or change options)")
            path.status = "assumed"
            return [path]
        saved_args = path.args
        if len(words) > 2:
            path.args = tuple(words[2:])
        saved_flag, self.in_source = self.in_source, True   # `return` at its top level ends only the file
        try:
            results = self.nested(path, text, line, same_env=True)
        finally:
            self.in_source = saved_flag
        for p in results:
            p.args = saved_args
            if p.ended == "return":
                p.ended = ""
        return results

    def call_function(self, path: Path, func: FuncDef, args: list[str], line: int) -> list[Path]:
        saved_args, saved_flag, saved_source = path.args, self.in_function, self.in_source
        saved_vars, saved_locals = dict(path.vars), path.local_names
        self.in_source = False
        path.args = tuple(args)
        path.local_names = frozenset()
        self.depth += 1
        self.in_function = True
        try:
            results = self.run_list(func.body, [path])
        finally:
            self.depth -= 1
            self.in_function, self.in_source = saved_flag, saved_source
        for p in results:
            p.args = saved_args
            for name in p.local_names:   # `local` names go back to what they were before the call
                if name in saved_vars:
                    p.vars[name] = saved_vars[name]
                else:
                    p.vars.pop(name, None)
            p.local_names = saved_locals
            if p.ended == "return":
                p.ended = ""
        return results

    def nested(self, path: Path, script: str, line: int, *, same_env: bool, subshell: bool = False,
               unchecked: bool = True) -> list[Path]:
        """Re-read ``script`` (``eval``, ``source``; ``bash -c``): same variables for eval; for a child shell
        only what was exported (a container's shell (``docker exec``): anything unset is unknown).
        ``unchecked``: a child shell's failure may not fail the script that starts it."""
        if self.depth >= MAX_DEPTH:
            if subshell:
                return [path]
            self.unknown_code(path, f"line {line} nests deeper than the reader follows")
            return [path]
        self.nested_chars += len(script)
        if self.nested_chars > MAX_NESTED_CHARS:
            raise _OutOfSteps("the script has the reader parse more text again than it follows")
        self.spend(len(script) // NESTED_CHARS_A_STEP)
        inner = path
        if subshell:
            inner.vars = {k: v for k, v in path.vars.items() if k in path.exported}
            inner.tainted = path.tainted or not same_env
            inner.args = ()
        saved_line, self.outer_line = self.outer_line, self.outer_line or line
        saved_loops, self.loops = self.loops, 0 if subshell else self.loops
        saved_flags = self.in_function, self.in_source, self.in_condition, self.suspended, self.exempt, self.silent
        if subshell:   # a child shell: `return` at its top level is refused there, whoever started it; set -e
            # applies there as its own options say, whatever context started it
            self.silent += unchecked
            self.in_function = self.in_source = False
            self.in_condition = self.suspended = 0
            self.exempt = []
        self.depth += 1
        self.sub_depth += subshell
        try:
            nodes = parse(script)
            cut = next((k for k, n in enumerate(nodes) if isinstance(n, Refused)), None)
            if cut is None or subshell:   # a child shell that bash refuses exits 2 (Refused, as a script does)
                results = self.run_list(nodes, [inner], tail=subshell)
            else:   # `eval` / `source` of text bash refuses: the command returns 2 there, and the script goes on
                results = self.refused_text(nodes, cut, inner, line)
        finally:
            self.depth -= 1
            self.sub_depth -= subshell
            self.outer_line = saved_line
            self.loops = saved_loops
            self.in_function, self.in_source, self.in_condition, self.suspended, self.exempt, self.silent = saved_flags
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


def _chain_decision(op: str, status: object, tail: bool = False) -> bool | None:
    """Whether the command after ``op`` runs, given the status before it (None: known at run time). An
    ordinary command before ``&&`` may fail, and bash's `set -e` ignores that: the rest of the script runs
    without what follows it. Only when the list ends the script is its success assumed (a failure there
    is the script's exit status: loud)."""
    if op == "":
        return True
    if op == "&&":
        return True if status is True or (status == "assumed" and tail) else \
            False if status in (False, FAILED) else None
    return True if status in (False, FAILED) else False if status is True else None


def _status_code(status: object) -> str | None:
    """The exit code a status stands for (None: unknown)."""
    return {True: "0", "assumed": "0", False: "1", FAILED: FAIL_CODE}.get(status) \
        if isinstance(status, (bool, str)) else None


def _small_int(text: str) -> int | None:
    """``text`` as a number when it is one bash reads the same way: a sign, then ASCII digits, at most 18
    (:func:`ci.numbers.whole_number`)."""
    value = whole_number(text[1:] if text[:1] in ("-", "+") else text)
    return None if value is None else -value if text[:1] == "-" else value


def _compare(x: int, op: str, y: int) -> bool:
    return {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]


def _exit_code(word: str) -> str:
    """The status ``exit WORD`` / ``return WORD`` leaves: WORD modulo 256 (``exit 256`` is 0, ``exit -1``
    255); "" when bash refuses WORD or it is known only at run time."""
    if word == FAIL_CODE:
        return word
    value = _small_int(word)
    return "" if value is None else str(value % 256)


def _code_status(code: str) -> object:
    return FAILED if code == FAIL_CODE else True if code == "0" else False if code.isdigit() else None


def _always_succeeds(handler: str) -> bool:
    """A handler of only ``echo`` / ``printf`` / ``true`` / ``:`` commands, without redirections or
    substitutions: nothing in it can fail."""
    if any(c in handler for c in "<>$`"):
        return False
    return all(not c.words or c.words[0] in ("echo", "printf", "true", ":") for c in split_commands(handler))


def _result_status(path: Path) -> object:
    """The status a subshell leaves: its `exit` code, else its last command's."""
    if path.ghost and path.exit_code:
        return _code_status(path.exit_code)
    return path.status


def _shown(code: str) -> str:
    if code == FAIL_CODE:
        return "with the runner's status"
    return code if code.isdigit() else "with a code known at run time"


def _loop_exits(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """After one pass of a loop body: (paths that go on looping, paths that left the loop by `break`).
    `continue` goes on; `break N` / `continue N` with N > 1 leave this loop and act on the enclosing one."""
    going, left = [], []
    for p in paths:
        what, _, count = p.ended.partition(" ")
        if what not in ("break", "continue"):
            (left if p.ended else going).append(p)
            continue
        n = int(count or "1")
        p.ended = f"{what} {n - 1}" if n > 1 else ""
        (going if what == "continue" and n == 1 else left).append(p)
    return going, left


def _find_exec_semicolon(words: list[str]) -> bool:
    """``find ... -exec CMD ;`` (also -execdir, -ok, -okdir): find exits 0 whatever CMD returns (only
    ``-exec CMD {} +`` passes a failure on); an unknown word may be either."""
    for i, w in enumerate(words):
        if w in ("-exec", "-execdir", "-ok", "-okdir"):
            ends = [x for x in words[i + 1:] if x in (";", "+") or _has_unknown(x)]
            return not ends or ends[0] != "+"
    return False


def _exec_command(args: list[str]) -> list[str]:
    """The command ``exec`` runs (empty: redirections only); its options ``-c``, ``-l``, ``-a NAME`` skipped."""
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "--":
        i += 2 if args[i] == "-a" else 1
    if args[i:i + 1] == ["--"]:
        i += 1
    rest = args[i:]
    if rest and re.fullmatch(r"\{\w+\}", rest[0]):   # `exec {fd}>file`: a redirection
        return []
    return rest


def _cd(cwd: str | None, args: list[str]) -> str | None:
    """The directory after ``cd ARGS`` (relative to the step's start; None when unknown)."""
    args = [a for a in args if a not in ("-L", "-P", "-e", "-@", "--")]
    if cwd is None or len(args) != 1 or _has_unknown(args[0]) or args[0].startswith(("/", "~", "-")):
        return None
    return _join("", cwd, args[0])


def _join(*parts: str) -> str:
    """Relative path parts joined and normalized (``..`` above the start stays, for the reader to refuse)."""
    out: list[str] = []
    for part in parts:
        for piece in part.split("/"):
            if piece in ("", "."):
                continue
            if piece == ".." and out and out[-1] != "..":
                out.pop()
            else:
                out.append(piece)
    return "/".join(out)


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
        if op in ("=", "==", "!=") and FAIL_CODE in (a, b) and a != b and not (double and any(c in b for c in "*?[")):
            same = False if (b if a == FAIL_CODE else a) in ("", "0") else None   # `[ "$rc" != 0 ]`
            return None if same is None else same if op != "!=" else not same
        if op in ("=", "==", "!="):
            same = fnmatch.fnmatchcase(a, b) if double and any(c in b for c in "*?[") else a == b
            return same if op != "!=" else not same
        if FAIL_CODE in (a, b):   # the judged runner's status: some code from 1 to 255
            other = _small_int(b if a == FAIL_CODE else a)
            if other is None or a == b:
                return None
            answers = {_compare(c, op, other) if a == FAIL_CODE else _compare(other, op, c) for c in range(1, 256)}
            return answers.pop() if len(answers) == 1 else None
        x, y = _small_int(a), _small_int(b)
        if x is None or y is None:
            return None
        return _compare(x, op, y)
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


def _inner_script(words: list[str]) -> tuple[str, bool, bool, bool] | None:
    """``[wrapper ...] bash -c SCRIPT``: (SCRIPT, whether it runs in this machine's environment, whether
    it runs with errexit: only with an ``e`` among the flags, as in ``bash -ec``, whether it runs with
    pipefail: only with ``-o pipefail`` among them; a child shell inherits neither option)."""
    for i, word in enumerate(words[:-1]):
        if word.rpartition("/")[2] not in SHELLS:
            continue
        # the shell's options in order (`-e -c`, `+e -c`, `-o errexit -c`, `--norc -ec`), then the script
        j, c_flag, errexit, pipefail = i + 1, False, False, False
        while j < len(words) and words[j][:1] in ("-", "+") and len(words[j]) > 1:
            w = words[j]
            if w == "--":
                j += 1
                break
            if w.startswith("--"):
                j += 1
                continue
            flags = w[1:-1] if w[-1:] == "o" else w[1:]
            c_flag = c_flag or (w[0] == "-" and "c" in flags)
            errexit = (w[0] == "-") if "e" in w[1:] else errexit
            if w[-1:] == "o" and j + 1 < len(words):   # `-o NAME`, `-eo NAME`: NAME is the option's argument
                errexit = (w[0] == "-") if words[j + 1] == "errexit" else errexit
                pipefail = (w[0] == "-") if words[j + 1] == "pipefail" else pipefail
                j += 2
                continue
            j += 1
        if c_flag and j < len(words):
            prefix = [w.rpartition("/")[2] for w in words[:i]]
            transparent = all(w in TRANSPARENT or w.startswith("-") or w.isdigit() or re.fullmatch(r"\d+[smh]?", w)
                              or "=" in w for w in prefix)
            return words[j], transparent, errexit, pipefail
    return None


@dataclass(frozen=True)
class Reading:
    runs: tuple[Run, ...]
    whys: dict[int, str]   # decision id -> the construct it hangs on
    # per runner call (line, words): what can swallow its failure, as (why, proven); empty: nothing
    masks: dict[tuple[int, tuple[str, ...]], tuple[tuple[str, bool], ...]] = field(default_factory=dict)
    calls_cut: int = 0   # runner calls left out of ``runs`` by the caller's cap (ci/github/scan.py)
    # the conditions of each path on which the script ends with a non-zero code: the step fails there,
    # loudly, so such a path needs no run (`check || return 1` in a function, then `check; RUN`)
    loud: tuple[frozenset[Decision], ...] = ()

    def state(self, runs: list[Run]) -> tuple[str, str]:
        """("run" | "maybe" | "never", why) of a command reached as each of ``runs`` (e.g. every run of
        one suite): run when the paths that reach it, with the paths that fail the step loudly, cover
        every outcome of the conditions they took."""
        live = [r for r in runs if not r.never]
        if not live:
            return ("never", runs[0].never) if runs else ("never", "")
        known = resolve([r.decisions for r in live] + list(self.loud))
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


def _start(env: ShellEnv) -> Path:
    return Path(errexit=env.errexit, pipefail=env.pipefail, errexit_why=env.no_errexit_why)


def read_runs(script: str, env: ShellEnv = ShellEnv(), *, runner: Callable[[tuple[str, ...]], bool] | None = None,
              source: Callable[[str], str | None] | None = None, budget: StepBudget | None = None) -> Reading:
    """Every simple command of ``script`` (its ``${{ }}`` already substituted) and where it is reached;
    with ``runner`` (which words start the runner), what can swallow each runner call's failure
    (:attr:`Reading.masks`). ``source`` reads a file of the tree for ``source FILE`` (None: not read).
    Bounded: MAX_READ_STEPS statements a reading, ``budget`` for all of them; past either, :func:`_unread`."""
    ev = Evaluator(env, source=source, budget=budget)
    try:
        nodes = parse(script)   # read again for each judged call: the evaluator never changes the tree
        ev.fall_off_the_end(ev.run_list(nodes, [_start(env)], tail=True))
    except RecursionError:   # nesting deeper than Python's stack: every command is a maybe
        return _unread(script, runner, "the script nests deeper than the reader follows")
    except _OutOfSteps as stop:
        return _unread(script, runner, str(stop))
    masks: dict[tuple[int, tuple[str, ...]], tuple[tuple[str, bool], ...]] = {}
    if runner is not None:
        calls = list(dict.fromkeys((r.line, r.words) for r in ev.runs if not r.never and runner(r.words)))
        for n, call in enumerate(calls):
            masks[call] = judge_call(script, env, call, source, budget, nodes) if n < MAX_JUDGED else (
                ("more runner calls in one script than the audit judges", False),)
    # a loop reaches the same run many times
    return Reading(tuple(dict.fromkeys(ev.runs)), ev.whys, masks, loud=tuple(ev.loud))


def _unread(script: str, runner: Callable[[tuple[str, ...]], bool] | None, why: str) -> Reading:
    """A script the reader gave up on: each command as written, a maybe hanging on ``why``, and each runner
    call's failure maybe swallowed (unproven): never a run, never a "never"."""
    runs = tuple(Run(c.words, c.line, frozenset({(0, True)})) for c in split_commands(script) if c.words)
    masks = {(r.line, r.words): ((why, False),) for r in runs if runner is not None and runner(r.words)}
    return Reading(runs, {0: why}, masks)


MAX_JUDGED = 16   # runner calls of one script whose failure is followed to the end of the script


def judge_call(script: str, env: ShellEnv, call: tuple[int, tuple[str, ...]],
               source: Callable[[str], str | None] | None = None,
               budget: StepBudget | None = None, nodes: list | None = None) -> tuple[tuple[str, bool], ...]:
    """Read ``script`` (parsed already: ``nodes``) again with the runner call ``call`` (line, words) failing:
    every path on which the failure does not make the step fail, as (why, proven). Empty: it always fails
    the step."""
    ev = Evaluator(env, fails=lambda line, words: (line, words) == call, source=source, budget=budget)
    try:
        paths = ev.run_list(parse(script) if nodes is None else nodes, [_start(env)], tail=True)
    except RecursionError:
        return (("the script nests deeper than the reader follows", False),)
    except _OutOfSteps as stop:
        return ((str(stop), False),)
    ev.fall_off_the_end(paths)
    out = []
    for kind, why in ev.outcomes:
        if kind != "loud":
            out.append((why, kind == "masked"))
    return tuple(dict.fromkeys(out))


def substitute(script: str, value: Callable[[str], str | None]) -> str:
    """``script`` with each ``${{ body }}`` whose ``value(body)`` is known replaced by it (others kept)."""
    def repl(m: re.Match) -> str:
        got = value(m.group(1).strip())
        return m.group(0) if got is None or "${{" in got else got
    return re.sub(r"\$\{\{(.*?)\}\}", repl, script, flags=re.S)


def _matches_anything(word: Word) -> bool:
    """A case pattern that is an unquoted ``*`` alone: it matches every word."""
    return len(word.pieces) == 1 and word.pieces[0].kind == "lit" and not word.pieces[0].quoted \
        and word.pieces[0].text == "*"
