"""The shell reader stays bounded on crafted scripts (SECURITY.md "dspark-audit", docs/audit-shell.md §5).

Each case is a short script that made the reader's work or memory grow exponentially: loops over known
lists unrolled inside each other (16^12 bodies from 500 bytes), a variable doubled 40 times, ``eval`` or
``bash -c`` of a 60 KB string inside such loops, a loop that makes thousands of distinct runner calls
resolved again for each of 256 matrix rows. Bounded means counted, not timed: the statements evaluated
are charged to a :class:`StepBudget`, and the answer must still be one real bash agrees with (a run
reached on the first pass of a known list is a run; what the reader gave up on is a maybe, never a run).
"""
from __future__ import annotations

import json
import tracemalloc

import pytest

import ci.github.scan as scan_module
from ci.github import shell_eval
from ci.github.scan import scan_workflows
from ci.github.shell_eval import StepBudget, read_runs
from ci.registration import register
from registered.test_ci_audit_crafted import LIMIT_MB, LIMIT_S, audit, sglang_tree

RUN = "python3 run_suite.py --hw cuda --suite stage-a"
SIXTEEN = " ".join(str(i) for i in range(1, 17))


def _is_runner(words: tuple[str, ...]) -> bool:
    return words[:2] == ("python3", "run_suite.py")


def _nest(depth: int, items: str, body: str) -> str:
    return f"for a in {items}; do\n" * depth + body + "\n" + "done\n" * depth


# one reading and the judged re-reading of its runner call(s): what a script may cost, whatever it holds
PER_READING = shell_eval.MAX_READ_STEPS + shell_eval.MAX_NESTED_CHARS // shell_eval.NESTED_CHARS_A_STEP + 1
CASES = {
    # (script, the runner call's state, a word its words must hold); the doubled values: memory watched too
    "two items, 40 loops deep": (_nest(40, "1 2", RUN), "run", "stage-a"),
    "sixteen items, 12 loops deep": (_nest(12, SIXTEEN, RUN), "run", "stage-a"),
    "a variable doubled 40 times": ("X=abcd\n" + 'X="$X$X"\n' * 40 + RUN + ' --name "$X"\n', "run", "${X}"),
    "an array doubled 40 times": ("A=(ab cd)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40 + RUN + ' "${A[@]}"\n', "run",
                                  "${A[@]}"),
    "eval of 60 KB in loops": ("X='true " + "a" * 60000 + "'\n" + _nest(12, SIXTEEN, 'eval "$X"') + RUN + "\n",
                               "maybe", "stage-a"),
    "bash -c of 60 KB in loops": (_nest(12, SIXTEEN, "bash -c 'true " + "a" * 60000 + "'") + RUN + "\n", "maybe",
                                  "stage-a"),
    "a function called 2^30 times": ("".join(f"f{i}() {{ f{i + 1}; f{i + 1}; }}\n" for i in range(30))
                                     + "f30() { true; }\n" + _nest(12, SIXTEEN, "f0") + RUN + "\n", "maybe", "stage-a"),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_crafted_script_costs_a_bounded_number_of_steps_and_keeps_a_sound_answer(name):
    """Before the budgets, each of these ran for minutes or hours (the first: 2^40 loop bodies; the
    doubled variable: 4 TB). Now a reading stops unrolling loops past MAX_STEPS and stops entirely
    past MAX_READ_STEPS or MAX_NESTED_CHARS of text parsed again; a value past MAX_VALUE_CHARS is
    unknown. The steps charged stay under one bound for every script, the memory under 64 MB, and
    the runner call is still a run where bash surely reaches it (first pass of a known list), a maybe
    where the reader gave up before it (a function nested past MAX_DEPTH calls, a reading stopped)."""
    script, state, word = CASES[name]
    budget = StepBudget(10 ** 12)
    watch = "doubled" in name   # tracemalloc slows the reader twentyfold: only where memory is the threat
    if watch:
        tracemalloc.start()
    try:
        reading = read_runs(script, runner=_is_runner, budget=budget)
        peak = tracemalloc.get_traced_memory()[1] if watch else 0
    finally:
        tracemalloc.stop()
    spent = 10 ** 12 - budget.left
    assert spent <= 2 * PER_READING, (spent, PER_READING)
    assert peak < 64 * 2 ** 20, peak
    calls = [r for r in reading.runs if _is_runner(r.words)]
    assert calls and all(word in " ".join(r.words) for r in calls), calls[:2]
    assert reading.state(calls)[0] == state, reading.state(calls)


def _workflow(steps: int, script: str, rows: int = 1) -> str:
    body = "".join(f"          {line}\n" for line in script.splitlines())
    matrix = ("    strategy:\n      matrix:\n        s: [" + ", ".join(f"s{i}" for i in range(rows)) + "]\n"
              if rows > 1 else "")
    """``steps`` steps running ``script`` ($I: the step's index, substituted), in a ``rows``-row matrix."""
    return ("name: m\non: pull_request\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-latest\n" + matrix
            + "    steps:\n" + "".join(f"      - name: s{i}\n        run: |\n{body.replace('$I', str(i))}"
                                            for i in range(steps)))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_past_the_scans_shared_budget_a_run_is_a_maybe_never_a_run(tmp_path, monkeypatch):
    """All readings of one scan share MAX_SCAN_STEPS (scripts x matrix rows x judged calls): a workflow of
    many cheap-looking steps cannot add up to hours. With the budget nearly spent, the first step's run is
    read (a definite run on pull_request) and the second step's script is read as written: its run is a
    maybe that names the spent budget, not a run, and its failure is an unproven mask."""
    root = sglang_tree(tmp_path, workflow=_workflow(2, "true\ntrue\n" + RUN.replace("stage-a", "stage-$I")))

    def events() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]]:
        got = scan_workflows(root, "sglang")
        return {r.target.rsplit("/", 1)[1]: (tuple(sorted(r.events)), tuple(sorted(r.maybe_events)),
                                             tuple(r.why_maybe)) for r in got.refs}

    assert events() == {"stage-0": (("pull_request",), (), ()), "stage-1": (("pull_request",), (), ())}
    monkeypatch.setattr(scan_module, "MAX_SCAN_STEPS", 6)   # the first step's reading and its judged re-reading
    got = events()
    assert got["stage-0"] == (("pull_request",), (), ()), got
    assert got["stage-1"][:2] == ((), ("pull_request",)), got
    assert any("budget of steps" in w for w in got["stage-1"][2]), got


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=12)
def test_a_workflow_of_crafted_scripts_is_audited_within_the_limits(tmp_path):
    """100 steps, each 16^12 loop bodies around its runner call (distinct texts, so no memo helps), then a
    256-row matrix over a loop of 65,536 distinct runner calls: one audit each, within LIMIT_S and
    LIMIT_MB. The first is a clean run of stage-a (bash reaches it on every step); the second is an
    unreadable-input error naming the cut, and the audit fails."""
    workflow = _workflow(100, "echo $I\n" + _nest(12, SIXTEEN, RUN))
    got = audit("--root", str(sglang_tree(tmp_path / "a", workflow=workflow)), "--adapter", "sglang",
                "--format", "json")
    assert got["rc"] == 0 and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (got["seconds"], got["err"])

    loops = "".join(f"for a{i} in {SIXTEEN}; do\n" for i in range(4))
    script = loops + RUN.replace("stage-a", "stage-$a0$a1$a2$a3") + "\n" + "done\n" * 4
    got = audit("--root", str(sglang_tree(tmp_path / "b", workflow=_workflow(1, script, rows=256))),
                "--adapter", "sglang", "--format", "json")
    assert got["rc"] == 1 and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, (got["seconds"], got["err"])
    cut = [f["message"] for f in json.loads(got["out"])["findings"] if f["rule"] == "unreadable-input"]
    assert len(cut) == 1 and f"more than {scan_module.MAX_RUNNER_CALLS} distinct runner calls" in cut[0], cut


DIGITS = "1" * 5000   # past the 4,300 digits Python's int() reads
NUMBERS = {
    # (script, the runner call's state): each raised ValueError inside the reader before (exit 3)
    "a test of 5,000 digits": (f"[ {DIGITS} -eq 1 ] && exit 0\n{RUN}\n", "maybe"),
    "a positional parameter of 5,000 digits": (f"f() {{ echo ${{{DIGITS}}}; }}\nf a\n{RUN}\n", "run"),
    "a positional parameter in other digits": ("f() { echo ${\u00b2}; }\nf a\n" + RUN + "\n", "run"),
    "an array index of 5,000 digits": (f"a=(x y)\necho ${{a[{DIGITS}]}}\n{RUN}\n", "run"),
    "break of 5,000 digits": (f"for i in 1 2; do break {DIGITS}; done\n{RUN}\n", "run"),
    "break in other digits": ("for i in 1 2; do break \u00b2; done\n" + RUN + "\n", "run"),
    "exit of 5,000 digits": (f"[ -f x ] && exit {DIGITS}\n{RUN}\n", "maybe"),
}


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
@pytest.mark.parametrize("name", sorted(NUMBERS))
def test_numbers_int_cannot_read_are_unknown_not_a_crash(name):
    """A number the reader would hand to int() is first checked: ASCII digits, at most 18 of them. One it
    cannot read is unknown (a test, an exit code) or ignored (a position, an index, a break count)."""
    script, state = NUMBERS[name]
    reading = read_runs(script, runner=_is_runner)
    runs = [r for r in reading.runs if _is_runner(r.words)]
    assert reading.state(runs)[0] == state


def _called_from_functions(calls: int) -> str:
    """The runner in f1, f1 called ``calls`` times from f2, f2 from f3, f3 from f4, f4 from the script:
    calls**4 places a flat reading without memory judged, each a scan of the script."""
    levels = "".join(f"f{i}() {{\n" + f"f{i - 1}\n" * calls + "}\n" for i in range(2, 5))
    return f"f1() {{\n{RUN}\n}}\n" + levels + "f4\n" * calls


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_flat_reading_judges_each_place_once_and_at_most_max_flat_looks():
    """50 calls a level: 50**4 = 6.25 million judgements before (a 1 KB script, hours); now each place is
    judged once (1 + 4 x 50), and past MAX_FLAT_LOOKS places (80 a level) the reading answers with a mask."""
    from ci.github.shell import MAX_FLAT_LOOKS, FlatLooks, masking, split_commands

    few = split_commands(_called_from_functions(2))
    run_at = next(k for k, c in enumerate(few) if c.words[:1] == ("python3",))
    looks = FlatLooks()
    assert masking(few, run_at, "sh -e {0}", looks=looks) == [] and len(looks.done) == 1 + 2 + 2 + 2 + 2
    fifty = split_commands(_called_from_functions(50))
    run_at = next(k for k, c in enumerate(fifty) if c.words[:1] == ("python3",))
    looks = FlatLooks()
    assert masking(fifty, run_at, "sh -e {0}", looks=looks) == [] and len(looks.done) == 1 + 4 * 50
    many = split_commands(_called_from_functions(80))
    run_at = next(k for k, c in enumerate(many) if c.words[:1] == ("python3",))
    looks = FlatLooks()
    reasons = masking(many, run_at, "sh -e {0}", looks=looks)
    assert len(looks.done) == MAX_FLAT_LOOKS and any("more places than the flat reading follows" in r
                                                     for r in reasons), reasons


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=6)
def test_a_workflow_of_flat_reading_traps_is_audited_within_the_limits(tmp_path):
    """A ``shell: sh`` step (read flat as well as by the tree) with the runner in a function called 50
    times a level, and a step of 65,536 unterminated heredocs (512 KB: each heredoc searched the rest of
    the script for its terminator, hours): one audit within LIMIT_S and LIMIT_MB."""
    def literal(text: str) -> str:
        return "        run: |\n" + "".join(f"          {line}\n" for line in text.splitlines())
    workflow = ("name: m\non: pull_request\npermissions: {}\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n"
                "      - name: nested\n        shell: sh\n" + literal(_called_from_functions(50))
                + "      - name: heredocs\n" + literal("cat <<E\n" * 65536 + RUN))
    got = audit("--root", str(sglang_tree(tmp_path, workflow=workflow)), "--adapter", "sglang", "--format", "json")
    assert got["rc"] in (0, 1) and got["seconds"] < LIMIT_S and got["maxrss_mb"] < LIMIT_MB, \
        (got["seconds"], got["err"])
