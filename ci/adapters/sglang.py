"""sglang's format: module-level ``register_<backend>_ci(...)`` calls in ``test/registered/``.

Read from syntax trees only (no import of sglang or of the tests). A call
``register_amd_ci(est_time=3600, suite="nightly-amd-8-gpu-mi35x", nightly=True)``
files its whole file into suite ``nightly-amd-8-gpu-mi35x`` for backend
``amd``; positional arguments follow sglang's order (est_time, suite, nightly,
disabled), and ``stage=`` + ``runner_config=`` name the suite
``<stage>-test-<runner_config>``. ``disabled="reason"`` keeps the file out of
its suite. Only module-level calls count: sglang's own reader ignores a call
inside a function or an ``if`` block, and so does this one (it says so).

A workflow step runs a suite with ``python3 run_suite.py --hw HW --suite S
[--nightly] [--auto-partition-id I --auto-partition-size N]`` (I is 0-based),
usually wrapped (``bash scripts/ci/amd/amd_ci_exec.sh ... python3 run_suite.py
...``). run_suite.py selects registrations whose ``nightly`` equals the flag,
so a nightly suite run without ``--nightly`` runs nothing. No gates.
Imports nothing from ``impl/``, torch, sglang or test code.
"""
from __future__ import annotations

import ast
import bisect
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from ci.adapters.base import UNRESOLVED, Adapter, RunnerCall, Target, parse_options
from ci.numbers import whole_number
from ci.registry.partition import MAX_SHARDS
from ci.safe_files import MAX_SOURCE_BYTES, UnreadableFile, read_inside
from ci.safe_python import PARSE_ERRORS, parse_quietly
from ci.safe_yaml import short
from ci.tree_files import files_inside, outside_note

REGISTERED_DIR = "test/registered"
REGISTER_RE = re.compile(r"^register_([a-z0-9]+)_ci$")
POSITIONAL = ("est_time", "suite", "nightly", "disabled")
KEYWORDS = POSITIONAL + ("stage", "runner_config", "in_process_group")
OPTIONS = {"--hw": True, "--suite": True, "--nightly": False,
           "--auto-partition-id": True, "--auto-partition-size": True}
_SKIP_FILES = ("__init__.py", "conftest.py")
CALL_TEXT_RE = re.compile(r"\bregister_[a-z0-9]+_ci\s*\(")


@dataclass(frozen=True)
class SuiteRegistration:
    file: str
    line: int
    backend: str               # cpu, cuda, amd, npu, xpu, musa, mlx, ...
    suite: str
    est_time: float
    nightly: bool
    disabled: Any = None       # None: enabled; otherwise sglang's reason (should be a non-empty string)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def schedule(self) -> str:
        return "nightly" if self.nightly else "per-commit"

    @property
    def job_id(self) -> str:
        return f"{self.schedule}/{self.backend}/{self.suite}"


@dataclass
class SuiteCollection:
    registrations: list[SuiteRegistration] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _func_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _read_call(rel: str, call: ast.Call, backend: str, problems: list[str]) -> SuiteRegistration | None:
    where = f"{rel}:{call.lineno}"
    name = _func_name(call)
    values: dict[str, Any] = {}
    if len(call.args) > len(POSITIONAL) or any(isinstance(a, ast.Starred) for a in call.args):
        problems.append(f"{where}: {name}(): at most {len(POSITIONAL)} plain positional arguments {list(POSITIONAL)}")
        return None
    pairs = list(zip(POSITIONAL, call.args)) + [(kw.arg, kw.value) for kw in call.keywords]
    for key, node in pairs:
        if key is None:
            problems.append(f"{where}: {name}(**...): write every argument literally")
            return None
        if key not in KEYWORDS:
            problems.append(f"{where}: {name}(): unknown argument {key!r}; expected {list(KEYWORDS)}")
            return None
        if key in values:
            problems.append(f"{where}: {name}(): argument {key!r} given twice")
            return None
        try:
            values[key] = ast.literal_eval(node)
        except ValueError:
            shown = ast.unparse(node)
            shown = shown if len(shown) <= 120 else shown[:117] + "..."   # a crafted expression: never whole
            problems.append(f"{where}: {name}({key}={shown}): not a literal; "
                            "run_suite.py reads the syntax tree and cannot see it")
            return None
        except (TypeError, SyntaxError, RecursionError, MemoryError, OverflowError) as exc:   # {[]: 1}, {[1]}
            problems.append(f"{where}: {name}({key}=...): a literal Python cannot evaluate "
                            f"({type(exc).__name__}); run_suite.py cannot read it either")
            return None
    est = values.get("est_time")
    if isinstance(est, bool) or not isinstance(est, (int, float)):
        problems.append(f"{where}: {name}(): est_time must be a number of seconds, got {short(est)}")
        return None
    try:
        seconds = float(est)
    except OverflowError:   # an int of hundreds of digits
        seconds = math.inf
    if not math.isfinite(seconds):
        problems.append(f"{where}: {name}(): est_time must be a finite number of seconds, got {short(est)}")
        return None
    stage, runner = values.get("stage"), values.get("runner_config")
    suite = values.get("suite")
    if (stage is None) != (runner is None) or (stage is not None and suite is not None):
        problems.append(f"{where}: {name}(): give suite=, or stage= with runner_config=, not a mix")
        return None
    if stage is not None:
        suite = f"{stage}-test-{runner}"
    if suite == "" and values.get("disabled") is not None:
        return None   # sglang's reader accepts a disabled file with no suite (it is run by path, if at all)
    if not isinstance(suite, str) or not suite:
        problems.append(f"{where}: {name}(): suite must be a non-empty string, got {short(suite)}")
        return None
    nightly = values.get("nightly", False)
    if not isinstance(nightly, bool):
        problems.append(f"{where}: {name}(nightly={short(nightly)}): must be True or False")
        return None
    return SuiteRegistration(rel, call.lineno, backend, suite, seconds, nightly, values.get("disabled"))


def _close_paren(text: str, start: int) -> int | None:
    """Index of the parenthesis closing the one at ``start`` (strings skipped), or None."""
    depth, i, quote = 0, start, ""
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif text.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif ch in "'\"":
            quote = text[i:i + 3] if text[i:i + 3] in ('"""', "'''") else ch
            i += len(quote) - 1
        elif ch == "#":
            i = text.find("\n", i)
            if i < 0:
                return None
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _lines_of(text: str, offsets: Iterator[int]) -> set[int]:
    """The 1-based line of each offset into ``text``: one pass over the newlines, then a binary search
    per offset (counting the newlines before each offset from the start was quadratic: a 1 MiB line of
    mentions took 15 s)."""
    starts = [m.start() for m in re.finditer("\n", text)]
    return {bisect.bisect_left(starts, offset) + 1 for offset in offsets}


def _top_level_calls(text: str, rel: str = "") -> Iterator[ast.Call | None]:
    """The ``register_*_ci(...)`` calls of a file when each starts at column 0 and stands alone on its
    lines, parsed one by one (line numbers kept) and handed out as they are parsed, so a file of many
    calls never holds their trees at once; a None, then nothing more, when the file needs a whole parse.
    Linear in the file: a call that starts inside the previous one's parentheses (the text scanned
    already) sends the file to the whole parse instead of being scanned again."""
    line, counted = 0, 0   # newlines in text[:counted]: counted forward only (linear in the file)
    scanned = 0            # the end of the previous call's text: nothing before it is scanned twice
    for match in CALL_TEXT_RE.finditer(text):
        if (match.start() and text[match.start() - 1] != "\n") or match.start() < scanned:
            yield None
            return
        close = _close_paren(text, match.end() - 1)
        end = text.find("\n", close + 1) if close is not None else -1
        if close is None or text[close + 1:end if end >= 0 else len(text)].split("#", 1)[0].strip():
            yield None
            return
        scanned = close + 1
        try:
            node = parse_quietly(text[match.start():close + 1], rel, mode="eval").body
        except PARSE_ERRORS:
            node = None
        if not isinstance(node, ast.Call):
            yield None
            return
        line += text.count("\n", counted, match.start())
        counted = match.start()
        ast.increment_lineno(node, line)
        yield node


def _fast_registrations(rel: str, text: str) -> tuple[list[SuiteRegistration], list[str]] | None:
    """Registrations and problems of a file whose calls all stand alone (:func:`_top_level_calls`), or None."""
    regs: list[SuiteRegistration] = []
    problems: list[str] = []
    for node in _top_level_calls(text, rel):
        if node is None:
            return None
        reg = _read_call(rel, node, REGISTER_RE.match(_func_name(node) or "").group(1), problems)
        if reg is not None:
            regs.append(reg)
    return regs, problems


def collect_suites(root: str | Path) -> SuiteCollection:
    root = Path(root)
    out = SuiteCollection()
    note = outside_note(root, REGISTERED_DIR)
    if note:
        out.problems.append(f"{note}: its registrations cannot be read")
    for path in files_inside(root, REGISTERED_DIR, problems=out.problems):   # too deep, unlistable: named
        if path.name in _SKIP_FILES:
            continue
        rel = path.relative_to(root).as_posix()
        try:
            text = read_inside(root, path, MAX_SOURCE_BYTES)
        except UnreadableFile as exc:
            out.problems.append(f"{exc}: its registrations cannot be read")
            continue
        out.files.append(rel)
        fast = _fast_registrations(rel, text)
        if fast is not None:   # every call at column 0, each parsed alone: no whole-file parse
            out.registrations += fast[0]
            out.problems += fast[1]
            continue
        try:
            tree = parse_quietly(text, rel)   # no SyntaxWarning (with a raw source line) reaches the log
        except SyntaxError as exc:
            out.problems.append(f"{rel}:{exc.lineno or 1}: syntax error: {exc.msg}")
            continue
        except (ValueError, RecursionError, MemoryError) as exc:   # a NUL byte; nesting past the parser's stack
            out.problems.append(f"{rel}: not parsable Python ({type(exc).__name__}): its registrations cannot be read")
            continue
        top = {id(stmt.value) for stmt in tree.body if isinstance(stmt, ast.Expr)}
        top_lines = {stmt.value.lineno for stmt in tree.body
                     if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)}
        mentioned = _lines_of(text, (m.start() for m in CALL_TEXT_RE.finditer(text)))
        # walking the whole tree is the slow part: only where a call may hide below module level
        nodes = ast.walk(tree) if mentioned - top_lines else (s.value for s in tree.body if isinstance(s, ast.Expr))
        for node in nodes:
            if not isinstance(node, ast.Call):
                continue
            name = _func_name(node)
            match = REGISTER_RE.match(name or "")
            if not match:
                continue
            if id(node) not in top:
                out.problems.append(f"{rel}:{node.lineno}: {name}(...) is not a module-level statement: "
                                    "run_suite.py never sees it, so the file is in no suite")
                continue
            reg = _read_call(rel, node, match.group(1), out.problems)
            if reg is not None:
                out.registrations.append(reg)
    return out


def expected_runner(backend: str, suite: str) -> str | None:
    """The runner label a suite name implies (AMD names carry GPU count and MI35x), when it does."""
    if backend != "amd":
        return None
    count = re.search(r"(\d+)-gpu", suite)
    gpus = count.group(1) if count else "1"
    arch = "mi35x" if "mi35x" in suite else "mi325"
    return f"linux-{arch}-gpu-{gpus}"


def runner_mismatch(suite: str, backend: str, labels: tuple[str, ...]) -> str | None:
    """Why runner ``labels`` cannot be the machine a suite's name asks for (GPU count, MI35x), or None."""
    if backend != "amd" or not labels or any("${{" in lbl for lbl in labels):
        return None
    count = re.search(r"(\d+)-gpu", suite)
    for label in labels:
        tail = re.search(r"-(\d+)$", label)
        if count and tail and tail.group(1) != count.group(1):
            return f"the suite needs {count.group(1)} GPU(s), runner {label} has {tail.group(1)}"
        arch = re.search(r"mi(\d+)", label)
        if "mi35x" in suite and arch and not arch.group(1).startswith("35"):
            return f"the suite is for MI35x, runner {label} is not"
    return None


INTERPRETER_RE = re.compile(r"(^|/)python[\d.]*$|^\$\{?PYTHON\w*\}?$|(^|/)pytest$")
RUNNER_PATH = "test/run_suite.py"
VARIABLE_RUN_RE = re.compile(r"(python[\d.]*|pytest)(\s+-\S+)*\s+[\"']?\$")


def _direct_path(words: tuple[str, ...]) -> RunnerCall | None:
    """``python3 [-u] test/registered/x.py`` (or a variable holding such a path): a registered file run by path."""
    for i, word in enumerate(words):
        if INTERPRETER_RE.search(word):
            rest = [w for w in words[i + 1:] if w not in ("-u", "-B")]
            if rest[:2] == ["-m", "pytest"]:
                rest = rest[2:]
            if rest and not rest[0].startswith("-") and (
                    ("registered/" in rest[0] and rest[0].endswith(".py")) or rest[0].startswith("$")):
                return RunnerCall({"file": rest[0]}, " ".join(words), tuple(rest[1:]))
            return None
    return None


# python options without an argument, and those that take one (`-X dev`, `-W ignore`)
PY_FLAGS, PY_ARG_FLAGS = set("bBdEhiIOPqsSuvVx"), set("XW")


def _runs_script(words: tuple[str, ...], i: int) -> bool:
    """``words[i]`` is run as a script: the first word of the command (executed directly), or the script
    operand of a python interpreter before it (its options skipped; after ``-c`` or ``-m`` it is an argument)."""
    if i == 0:
        return True
    for p in range(i - 1, -1, -1):
        if not INTERPRETER_RE.search(words[p]) or "pytest" in words[p]:
            continue
        j = p + 1
        while j < i:
            opt = words[j]
            if opt == "--":
                j += 1
                break
            if not opt.startswith("-") or len(opt) < 2:
                return False
            letters = opt[1:]
            if any(ch in "cm" for ch in letters) or not all(ch in PY_FLAGS | PY_ARG_FLAGS for ch in letters):
                return False
            j += 2 if letters[-1] in PY_ARG_FLAGS and len(letters) == 1 else 1
        return j == i
    return False


class SGLangAdapter(Adapter):
    name = "sglang"
    has_gates = False
    partial_targets = True
    runner_hint = "python3 run_suite.py --hw HW --suite SUITE [--nightly] --auto-partition-id I --auto-partition-size N"
    context: Mapping[str, Any] = {}   # github.repository: --repo, or the tree's git remote (ci.audit.foreign)

    def collect(self, root: Path) -> SuiteCollection:
        return collect_suites(root)

    def find_call(self, words: tuple[str, ...]) -> RunnerCall | None:
        """The registry's runner (test/run_suite.py with --hw), or a registered file run by path.

        Another script of the same name (python/sglang/multimodal_gen/test/run_suite.py, no --hw) is not it."""
        for i, word in enumerate(words):
            if word == "run_suite.py" or word.endswith("/run_suite.py"):
                if not _runs_script(words, i):
                    return None   # an argument of echo, of `python3 -c CODE`, of `python3 -m mod`: not run
                if "/" in word and not (word.removeprefix("./") == RUNNER_PATH or
                                        (word.startswith("/") and word.endswith("/" + RUNNER_PATH))):
                    return None   # another script of the same name (a package's own test runner)
                options = parse_options(words, i + 1, OPTIONS)
                if "--hw" not in options:
                    return None
                return RunnerCall(options, " ".join(words), tuple(words[i + 1:]))
        return _direct_path(words)

    def mentions_runner(self, script: str) -> bool:
        """run_suite.py, a registered file, or an interpreter given a variable (``python3 "$TEST"``)."""
        return "run_suite" in script or "registered/" in script or bool(VARIABLE_RUN_RE.search(script))

    def call_masks(self, call: RunnerCall) -> list[str]:
        return [f"`{w}` on run_suite.py's command line prints the usage and runs nothing"
                for w in call.rest if w in ("--help", "-h")]

    def targets(self, options: Mapping[str, str | None]) -> tuple[list[Target], str | None]:
        if "file" in options:
            path = str(options["file"]).removeprefix("./")
            if path != UNRESOLVED and path.startswith(REGISTERED_DIR + "/") and path.endswith(".py"):
                return [Target("file", path)], None
            return [], None
        hw, suite = options.get("--hw"), options.get("--suite")
        if UNRESOLVED in (hw, suite):
            unknown = " and ".join(n for n, v in (("--hw", hw), ("--suite", suite)) if v == UNRESOLVED)
            return [], f"run_suite.py {unknown} known only at run time"
        if not suite:
            return [], "run_suite.py without --suite"
        if not hw:
            return [], f"run_suite.py --suite {suite} without --hw"
        schedule = "nightly" if "--nightly" in options else "per-commit"
        target = f"{schedule}/{hw}/{suite}"
        pid, size = options.get("--auto-partition-id"), options.get("--auto-partition-size")
        if (pid is None) != (size is None):
            return [], "--auto-partition-id and --auto-partition-size go together"
        if pid is None:
            return [Target("suite", target)], None
        if UNRESOLVED in (pid, size):
            why = "--auto-partition-id/--auto-partition-size known only at run time"
            return [Target("suite", target, None, why)], None
        part, parts = whole_number(str(pid)), whole_number(str(size))
        if part is None or parts is None or not 0 <= part < parts:
            return [], (f"--auto-partition-id {short(pid)} --auto-partition-size {short(size)}: "
                        "expected 0 <= id < size")
        if parts > MAX_SHARDS:   # the partition checks count every partition: bounded here
            return [], f"--auto-partition-size {short(size)}: at most {MAX_SHARDS} partitions (a GitHub matrix's jobs)"
        return [Target("suite", target, (part + 1, parts))], None
