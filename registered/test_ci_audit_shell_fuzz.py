"""The shell reader (ci/github/shell_eval.py) against real bash on random scripts: never a false green.

Hypothesis writes small bash scripts from a grammar of the reader's subset: runner calls
(``python3 run_suite.py --suite sN``, each call site its own suite), ``true``/``false``/``exit N``/
``return N`` (N past 255 too), ``&&``, ``||``, ``!``, ``| cat``, ``&``, ``if``/``elif``/``else``, bounded
``while``/``until`` loops, ``for``, ``case``, ``{ }``, ``( )``, functions, ``set -e``/``set +e``/``set -o pipefail``,
``trap '...' EXIT`` / ``ERR``, empty ``case`` arms, variables set by the script or read from the environment
(``X``, ``Y``), ``$?``, ``rc=$?; exit $rc``, ``bash -c '...'`` and ``eval '...'``. Each script is read by
:func:`read_runs` for both of GitHub's bash command lines (``bash -e {0}`` with no ``shell:``,
``bash --noprofile --norc -eo pipefail {0}`` for ``shell: bash``) and run by that bash with a stub
``python3`` that records its suite and exits 0, or 3 for the suites told to fail, once for every
assignment of the environment names the script reads. For every runner call:

1. the reader says "run": with every call passing, bash calls it or the step fails (exits non-zero);
2. the reader says "never": no bash run calls it;
3. the reader finds nothing that swallows its failure (no mask): with it failing and the other
   calls passing, every bash run that calls it exits non-zero.

1 and 3 are the false greens the audit promises never to give (docs/audit-shell.md §3); 2 is a
false "never". Per commit a fixed (derandomized) set of examples; ``DSPARK_SHELL_FUZZ_EXAMPLES=N``
runs N examples, with a fresh seed when ``DSPARK_SHELL_FUZZ_SEED`` is set too.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import signal
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ci.github.shell_eval import ShellEnv, read_runs
from ci.registration import register
from registered.skips import registered_skip

EXAMPLES = int(os.environ.get("DSPARK_SHELL_FUZZ_EXAMPLES", "150"))
SEED = os.environ.get("DSPARK_SHELL_FUZZ_SEED")
MAX_CALLS = 3
ENV_NAMES = ("X", "Y")
ENV_VALUES = {"X": (None, "a", "b"), "Y": (None, "a")}   # None: unset
# GitHub's command line per `shell:` -> the reader's view of it
SHELLS = {"bash -e": (["bash", "-e"], ShellEnv(unknown_names=frozenset(ENV_NAMES))),
          "bash -eo pipefail": (["bash", "--noprofile", "--norc", "-eo", "pipefail"],
                                ShellEnv(unknown_names=frozenset(ENV_NAMES), pipefail=True))}
STUB = """#!/bin/sh
echo "$3" >> "$FUZZ_LOG"
case " $FUZZ_FAIL " in *" $3 "*) exit 3;; esac
exit 0
"""


def is_runner(words: tuple[str, ...]) -> bool:
    return words[:3] == ("python3", "run_suite.py", "--suite")


# ---- the grammar ----
@dataclass
class Ctx:
    calls: int = 0             # runner call sites so far (suites s1, s2, ...)
    loops: int = 0             # counters of bounded loops so far
    funcs: int = 0             # functions defined so far (f1, f2, ...; a body calls only earlier ones)
    names: set[str] = field(default_factory=set)   # environment names the script reads


@dataclass(frozen=True)
class Where:
    in_func: bool = False
    in_loop: bool = False      # `break` / `continue` allowed
    no_continue: bool = False  # in `while true; do ...; break; done`: a `continue` would spin
    quoted: bool = False       # inside '...': no single quote may appear
    depth: int = 0


def runner_call(draw, ctx: Ctx) -> str:
    if ctx.calls >= MAX_CALLS:
        return draw(st.sampled_from(["true", "false"]))
    ctx.calls += 1
    return f"python3 run_suite.py --suite s{ctx.calls}"


def env_word(draw, ctx: Ctx) -> str:
    name = draw(st.sampled_from(ENV_NAMES + ("v", "w")))
    if name in ENV_NAMES:
        ctx.names.add(name)
    return f'"${name}"'


def bracket_test(draw, ctx: Ctx) -> str:
    word = env_word(draw, ctx)
    kind = draw(st.sampled_from(["=a", "=b", "!=a", "-n", "-z", "$?"]))
    if kind == "$?":
        return f"[ $? {draw(st.sampled_from(['-eq', '-ne', '-gt', '!=']))} 0 ]"
    if kind in ("-n", "-z"):
        return f"[ {kind} {word} ]"
    op, value = kind[:-1], kind[-1]
    return f"[ {word} {op} {value} ]"


def simple(draw, ctx: Ctx, w: Where) -> str:
    kinds = ["run", "run", "run", "true", "false", "exit", "echo", "assign", "test", "set", "rc", "status"]
    if w.in_func:
        kinds += ["return", "return"]
    else:
        kinds += ["return-top"]
    if w.in_loop:
        kinds += ["break"] + ([] if w.no_continue else ["continue"])
    if ctx.funcs:
        kinds += ["call", "call"]
    kind = draw(st.sampled_from(kinds))
    if kind == "run":
        return runner_call(draw, ctx)
    if kind in ("true", "false"):
        return kind
    if kind == "exit":
        return f"exit {draw(st.sampled_from(['0', '1', '3', '256', '00']))}"   # codes are taken modulo 256
    if kind in ("return", "return-top"):
        return f"return {draw(st.sampled_from(['0', '1', '256']))}"
    if kind == "echo":
        return "echo hi"
    if kind == "assign":
        name = draw(st.sampled_from(["v", "w"]))
        value = draw(st.sampled_from(["a", "b", "", "$X", "$Y"]))
        if value in ("$X", "$Y"):
            ctx.names.add(value[1:])
        return f"{draw(st.sampled_from(['', 'export ']))}{name}={value}"
    if kind == "test":
        return bracket_test(draw, ctx)
    if kind == "set":
        return draw(st.sampled_from(["set -e", "set +e", "set -o pipefail", "set +o pipefail"]))
    if kind == "rc":
        return draw(st.sampled_from(["rc=$?; exit $rc", "exit $?", "rc=$?", "exit $rc", "echo $?"]))
    if kind == "status":
        return draw(st.sampled_from([":", "true", "echo done"]))
    if kind in ("break", "continue"):
        return kind
    return f"f{draw(st.integers(1, ctx.funcs))}"


def statements(draw, ctx: Ctx, w: Where, at_least: int = 1, most: int = 3) -> str:
    return "; ".join(statement(draw, ctx, w) for _ in range(draw(st.integers(at_least, most))))


def condition(draw, ctx: Ctx, w: Where) -> str:
    kind = draw(st.sampled_from(["test", "test", "run", "true", "false", "not", "and", "or", "call"]))
    if kind == "test":
        return bracket_test(draw, ctx)
    if kind == "run":
        return runner_call(draw, ctx)
    if kind in ("true", "false"):
        return kind
    if kind == "call" and ctx.funcs:
        return f"f{draw(st.integers(1, ctx.funcs))}"
    if kind == "not":
        return f"! {bracket_test(draw, ctx)}"
    left, right = condition_atom(draw, ctx), condition_atom(draw, ctx)
    return f"{left} {'&&' if kind == 'and' else '||'} {right}"


def condition_atom(draw, ctx: Ctx) -> str:
    kind = draw(st.sampled_from(["test", "run", "true", "false"]))
    if kind == "test":
        return bracket_test(draw, ctx)
    return runner_call(draw, ctx) if kind == "run" else kind


def compound(draw, ctx: Ctx, w: Where) -> str:
    inner = Where(w.in_func, w.in_loop, w.no_continue, w.quoted, w.depth + 1)
    kinds = ["if", "if", "while", "for", "case", "group", "subshell"]
    if not w.quoted:
        kinds += ["trap", "eval", "bash-c"]
    kind = draw(st.sampled_from(kinds))
    if kind == "if":
        text = f"if {condition(draw, ctx, w)}; then {statements(draw, ctx, inner)}; "
        for _ in range(draw(st.integers(0, 1))):
            text += f"elif {condition(draw, ctx, w)}; then {statements(draw, ctx, inner)}; "
        if draw(st.booleans()):
            text += f"else {statements(draw, ctx, inner)}; "
        return text + "fi"
    if kind == "while":
        ctx.loops += 1
        i = f"i{ctx.loops}"
        body = Where(w.in_func, True, False, w.quoted, w.depth + 1)
        shape = draw(st.sampled_from(["count", "count-until", "count-cond", "once", "false", "until-true"]))
        if shape == "count":
            return f"{i}=; while [ \"${i}\" != xx ]; do {i}=${{{i}}}x; {statements(draw, ctx, body)}; done"
        if shape == "count-until":
            return f"{i}=; until [ \"${i}\" = xx ]; do {i}=${{{i}}}x; {statements(draw, ctx, body)}; done"
        if shape == "count-cond":
            return (f"{i}=; while [ \"${i}\" != xx ] && {condition_atom(draw, ctx)}; do {i}=${{{i}}}x; "
                    f"{statements(draw, ctx, body)}; done")
        if shape == "once":
            once = Where(w.in_func, True, True, w.quoted, w.depth + 1)
            return f"while {condition(draw, ctx, w)}; do {statements(draw, ctx, once)}; break; done"
        if shape == "false":
            return f"while false; do {statements(draw, ctx, body)}; done"
        return f"until true; do {statements(draw, ctx, body)}; done"
    if kind == "for":
        body = Where(w.in_func, True, False, w.quoted, w.depth + 1)
        items = draw(st.sampled_from(["a b", "a", "b a", '"$X"', "$Y"]))
        if "X" in items or "Y" in items:
            ctx.names.add("X" if "X" in items else "Y")
        body_text = statements(draw, ctx, body)
        if draw(st.booleans()):
            body_text = f"if [ \"$x\" = a ]; then {body_text}; fi"
        return f"for x in {items}; do {body_text}; done"
    if kind == "case":
        word = draw(st.sampled_from(['"$X"', '"$Y"', '"$v"', "a"]))
        if word[2:3] in ENV_NAMES:
            ctx.names.add(word[2])
        arms = []
        for pattern in draw(st.lists(st.sampled_from(["a", "b", "a|b", "*"]), min_size=1, max_size=3)):
            body = "" if draw(st.integers(0, 4)) == 0 else statements(draw, ctx, inner)   # an empty arm: 0
            arms.append(f"{pattern}) {body};;")
        return f"case {word} in {' '.join(arms)} esac"
    if kind == "group":
        return f"{{ {statements(draw, ctx, inner)}; }}"
    if kind == "subshell":
        return f"( {statements(draw, ctx, inner)} )"
    if kind == "trap":
        handler = draw(st.sampled_from(["echo bye", "exit 0", "exit 1", "rc=$?; exit $rc", "true", "false",
                                        "RUN"]))
        if handler == "RUN":
            handler = runner_call(draw, ctx)
        return f"trap '{handler}' {draw(st.sampled_from(['EXIT', 'EXIT', 'ERR']))}"
    quoted = Where(False, False, False, True, w.depth + 1)
    if kind == "eval":
        return f"eval '{statements(draw, ctx, Where(w.in_func, w.in_loop, w.no_continue, True, w.depth + 1))}'"
    opts = draw(st.sampled_from(["-c", "-ec", "-e -c", "+e -c"]))
    return f"bash {opts} '{statements(draw, ctx, quoted)}'"


def statement(draw, ctx: Ctx, w: Where) -> str:
    if w.depth < 3 and draw(st.integers(0, 9)) < 3:
        node = compound(draw, ctx, w)
    else:
        node = simple(draw, ctx, w)
    shape = draw(st.sampled_from(["plain"] * 6 + ["and", "or", "not", "pipe", "background"]))
    if shape == "background":
        return f"{node} & {draw(st.sampled_from(['wait', 'true', 'wait $!']))}"
    if shape == "and":
        return f"{node} && {simple(draw, ctx, w)}"
    if shape == "or":
        return f"{node} || {simple(draw, ctx, w)}"
    if shape == "not" and not node.startswith(("!", "[")):
        return f"! {node}"
    if shape == "pipe" and not node.endswith(("&& true", "|| true")):
        return f"{node} | cat"
    return node


@st.composite
def scripts(draw) -> tuple[str, tuple[str, ...]]:
    """(script, the environment names it reads)."""
    ctx = Ctx()
    lines = []
    for _ in range(draw(st.integers(0, 2))):
        body = statements(draw, ctx, Where(in_func=True, depth=1))
        ctx.funcs += 1
        lines.append(f"f{ctx.funcs}() {{ {body}; }}")
    for _ in range(draw(st.integers(1, 5))):
        lines.append(statement(draw, ctx, Where()))
    if not ctx.calls:
        lines.insert(draw(st.integers(len(lines) - 1, len(lines))), runner_call(draw, ctx))
    return "\n".join(lines) + "\n", tuple(sorted(ctx.names))


# ---- bash and the reader ----
def environments(names: tuple[str, ...]) -> list[dict[str, str]]:
    out = []
    for values in itertools.product(*(ENV_VALUES[n] for n in names)):
        out.append({n: v for n, v in zip(names, values) if v is not None})
    return out


def run_bash(work: Path, argv: list[str], env: dict[str, str], failing: str) -> tuple[int, set[str]] | None:
    """(exit status, suites the stub was called with) of one run; None when it ran past its time."""
    log = work / "calls"
    log.write_text("")
    proc = subprocess.Popen(["timeout", "5", *argv, str(work / "step.sh")], cwd=work, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env={"PATH": f"{work / 'bin'}:/usr/bin:/bin", "FUZZ_LOG": str(log), "FUZZ_FAIL": failing,
                                 "HOME": str(work), **env})
    try:
        status = proc.wait(timeout=30)
    finally:   # a background job the script left behind goes with it
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    if status in (124, 137):
        return None
    return status, set(log.read_text().split())


def violations(script: str, names: tuple[str, ...], work: Path) -> list[str]:
    """Each disagreement of the reader with bash on ``script``, described."""
    (work / "step.sh").write_text(script)
    found = []
    for shell, (argv, shell_env) in SHELLS.items():
        reading = read_runs(script, shell_env, runner=is_runner)
        by_suite: dict[str, list] = {}
        for run in reading.runs:
            if is_runner(run.words) and len(run.words) == 4:
                by_suite.setdefault(run.words[3], []).append(run)
        masks = {}
        for (line, words), why in reading.masks.items():
            if is_runner(words) and len(words) == 4:
                masks.setdefault(words[3], []).append(why)
        suites = sorted(by_suite)
        runs = []   # (env, failing suite or "", status, called)
        for env in environments(names):
            for failing in ["", *suites]:
                got = run_bash(work, argv, env, failing)
                if got is not None:
                    runs.append((env, failing, *got))
        for suite in suites:
            state, _why = reading.state(by_suite[suite])
            for env, failing, status, called in runs:
                where = f"[{shell}] env {env or '{}'}, failing {failing or 'none'}"
                if state == "run" and not failing and suite not in called and status == 0:
                    found.append(f"false run: {suite}: {where}: bash exits 0 without calling it")
                if state == "never" and suite in called:
                    found.append(f"false never: {suite}: {where}: bash calls it")
                if (failing == suite and suite in masks and all(not m for m in masks[suite]) and suite in called
                        and status == 0):
                    found.append(f"false unmasked: {suite}: {where}: bash calls it and exits 0")
    return found


@pytest.fixture(scope="module")
def work():
    if not shutil.which("bash") or not shutil.which("timeout"):
        registered_skip("needs-bash")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "bin").mkdir()
        (root / "bin" / "python3").write_text(STUB)
        (root / "bin" / "python3").chmod(0o755)
        yield root


def _fuzzed(test):
    test = settings(max_examples=EXAMPLES, deadline=None, derandomize=SEED is None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])(test)
    return seed(int(SEED))(test) if SEED is not None else test


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=20)
@_fuzzed
@given(case=scripts())
def test_the_reader_never_says_more_than_bash_does(work, case):
    script, names = case
    found = violations(script, names, work)
    assert not found, "\n" + script + "\n".join(found[:6])


# Scripts the fuzzer found (new seeds), each a false green of the reader before its fix; checked the same way.
FOUND = {
    # every arm of a run-time `case` was one condition: the `b) exit 0` arm read as covered
    "case-arm-exits-0": ('case "$X" in a) for x in a b; do python3 run_suite.py --suite s2; done; set -e;; '
                         'a) ;; b) exit 0;; esac\npython3 run_suite.py --suite s3\n', ("X",)),
    # a command that may fail under set -e ends the script through `trap 'exit 0' EXIT`
    "exit-trap-0-after-may-fail": ("{ trap 'exit 0' EXIT; }\n[ \"$X\" = a ]\npython3 run_suite.py --suite s1\n",
                                   ("X",)),
    # `( ! f1 )` alone: bash lets set -e stop f1 at the runner's failure and gives the subshell status 0
    "bare-negation-subshell": ("f1() { python3 run_suite.py --suite s1; python3 run_suite.py --suite s2 && "
                               "python3 run_suite.py --suite s3; if [ \"$X\" = a ]; then true; fi; }\n( ! f1 )\n",
                               ("X",)),
    # an `exit` in the ERR trap runs the EXIT trap, whose `exit 0` masks the runner's failure
    "err-trap-exit-then-exit-trap": ("trap 'exit 0' EXIT\ntrap 'exit 1' ERR\npython3 run_suite.py --suite s1\n", ()),
    # an `if` whose branch ends in `! RUN` returns 1, so `&&` skips what follows; the reader merged that branch
    # into the skipping side, whose `if` returns 0
    # the same merge, the other way: a branch ending in a runner that may fail merged into the skipping side of an
    # `if` read as returning 0, so `|| RUN` after the `case` around it was a false "never" (seed 9118)
    "if-branch-may-fail-then-or": ('case "$X" in a) if python3 run_suite.py --suite s1; then '
                                   'if [ "$X" = a ]; then python3 run_suite.py --suite s2; fi; fi;; esac '
                                   '|| python3 run_suite.py --suite s3\n', ("X",)),
    # the EXIT trap at the script's natural end was not run, so its runner's failure under `set +e` (exit 0) went
    # unseen (seed 9118)
    "exit-trap-runner-after-set-plus-e": ("set -e\ntrap 'python3 run_suite.py --suite s1' EXIT\n"
                                          "if [ \"$X\" = a ]; then python3 run_suite.py --suite s2; else set +e; fi\n",
                                          ("X",)),
    # a subshell's EXIT trap that exits 1 was read as leaving status 0 (seed 9117)
    "subshell-exit-trap-exits-1": ("( trap 'exit 1' EXIT ) || python3 run_suite.py --suite s1\n", ()),
    # under pipefail a pipeline part's `exit 3` was read as ending the script, though `set +e` was on (seed 9118)
    "pipefail-part-exits-under-set-plus-e": ('f1() { if [ -z "$X" ]; then python3 run_suite.py --suite s1; exit 3; '
                                             'fi; }\nset +e\nf1 | cat\ntrue\n', ("X",)),
    # the ERR trap runs on a failure where `set -e` is off, and its `exit 0` ends the script (seed 9124)
    "err-trap-without-set-e": ("set +e\npython3 run_suite.py --suite s1\n{ trap 'exit 0' ERR; }\nfalse\n", ()),
    "if-negated-branch-then-and": ('if [ "$X" = a ]; then ! python3 run_suite.py --suite s1; fi && '
                                   'python3 run_suite.py --suite s2\ntrue\n', ("X",)),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=3)
@pytest.mark.parametrize("name", sorted(FOUND))
def test_the_scripts_the_fuzzer_found_agree_with_bash(work, name):
    script, names = FOUND[name]
    found = violations(script, names, work)
    assert not found, "\n" + script + "\n".join(found[:6])
