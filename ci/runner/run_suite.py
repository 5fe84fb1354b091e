"""Run one group shard (what a GitHub job runs) or one job, each job in its own pytest process.

    python -m ci.runner.run_suite --group per-commit/cpu --shard 2/3 [--dry-run] [--emulate [hip|cuda]]
    python -m ci.runner.run_suite --job per-commit/cpu/kernels [--shard I/N] [--dry-run] [--emulate [hip|cuda]]

``--shard I/N`` is always a shard of the GROUP (``schedule/hardware``); with ``--job``
it selects the tests of that job that the group shard holds. Each job runs as
``pytest -p ci.runner.pytest_plugin --ci-job ID [--ci-shard I/N]`` (the plugin attests the
machine, applies the job's gate env, selects, times out, retries and accounts);
this layer adds the process-level part: the hermetic environment of the process,
variants one after another, ``ci-results/<job>/`` (JUnit, JSON-lines report,
durations, Markdown), a combined summary (appended to ``$GITHUB_STEP_SUMMARY``),
and a verdict that survives a killed or hung pytest. Imports no torch.

Stopping and sharing (docs/design.md §8.6). SIGTERM or SIGINT to the runner, for the whole run, stops
every pytest in flight (SIGINT to its process group, SIGKILL after ``--kill-grace``, then whatever is
left in the group), writes the JUnit and summaries with the unfinished tests named (started without a
result, and not started) and exits ``128 + signal``: 130 for SIGINT, 143 for SIGTERM. Each pytest gets its
own temporary folder (``TMPDIR``; torch's ``pytorch-errorfile-*`` land there), removed when it ends.
Outputs are written under temporary names and renamed when complete (``ci.safe_files.write_atomic``); an
output path that is a symlink is refused. A job shard's results are locked for the run: a second run of
the same job shard into the same folder is refused with one line and exit 2 (it does not wait).

Exit codes: 0 every job passed; 1 a job failed or nothing was selected; 2 bad arguments, a results
folder in use by another run, or an output path that is a symlink; 130 / 143 stopped by SIGINT / SIGTERM;
with ``--job``, pytest's own code when it is none of these (3 internal error, 4 usage error).
"""
from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from ci.registry.catalog import CatalogError
from ci.registry.collect import CollectionError
from ci.registry.durations import DurationsError
from ci.runner.jobenv import hermetic_env, job_wanted_env, read_gates
from ci.runner.job_process import KILL_GRACE_S, RUNNER_SIGNALLED, StopFlag, run_process, stop_on_signals
from ci.registry.jobs import Job, Registry, load_registry, parse_group_id, sanitize
from ci.registry.partition import parse_shard
from ci.runner.run_lock import LockRefused, hold
from ci.safe_files import UnsafeOutput, write_atomic

RESULTS_DIR = "ci-results"
EMULATED_PLATFORMS = ("hip", "cuda")
XDIST_MIN_EST_S = 30.0   # below this estimate, starting xdist workers (each importing torch) costs more than it saves
COUNT_KEYS = ("passed", "flaky", "failed", "error", "skipped", "skipped-unregistered", "xfailed", "not-run")


@dataclass
class Outcome:
    job_id: str
    shard: str
    rc: int
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    failures: list[dict] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    attestation: list[str] = field(default_factory=list)
    emulation: str | None = None
    slowest: list[tuple[float, str]] = field(default_factory=list)
    cpu_seconds: float = 0.0      # user + sys of the pytest process tree (workers included)
    phases: dict[str, float] = field(default_factory=dict)   # process start, collection, tests, exit (seconds)
    stopped: str | None = None    # what stopped pytest early (a timeout, or a signal to the runner)
    unfinished: list[str] = field(default_factory=list)    # started, no result, when pytest was stopped
    not_started: list[str] = field(default_factory=list)   # selected, never started, when pytest was stopped

    @property
    def runner_signalled(self) -> bool:
        """The runner itself was told to stop: no further job may start."""
        return (self.stopped or "").startswith(RUNNER_SIGNALLED)

    @property
    def ok(self) -> bool:
        return self.rc == 0


def banner(text: str) -> str:
    line = "!" * max(60, len(text) + 8)
    return f"{line}\n!!! {text}\n{line}"


# -- the environment and command of one job's pytest process --------------------------------
def job_environment(job: Job, *, root: Path, emulate: str | None = None, base: dict[str, str] | None = None,
                    quiet: bool = False, out: TextIO | None = None) -> dict[str, str]:
    """The hermetic process env: stray gate variables removed (each printed), the job's set.

    When emulating, the hardware default env is left to the plugin (it uses the env of the
    label this machine is, which only a probe inside the job's process knows).
    """
    hw_env = {} if emulate else dict(job.hardware.env)
    wanted = job_wanted_env(hw_env, job.env, job_id=job.id, hardware=job.key.hardware, emulate=emulate)
    result = hermetic_env(dict(os.environ if base is None else base), wanted, read_gates(root))
    if not quiet:
        for line in result.removal_lines():
            print(line, file=out or sys.stdout, flush=True)
    return result.env


HYPOTHESIS_PLUGIN = "hypothesispytest"  # hypothesis' pytest11 entry point


def uses_hypothesis(root: Path, files: list[str]) -> bool:
    """Whether any of ``files`` (or a conftest.py above them) mentions hypothesis. Its pytest plugin imports
    hypothesis in every process's terminal summary (~2 s of CPU); a job whose files never use it turns the
    plugin off. A file that cannot be read counts as using it."""
    paths = {Path(f) for f in files} | {Path(f).parent / "conftest.py" for f in files} | {Path("conftest.py")}
    for rel in paths:
        try:
            if "hypothesis" in (root / rel).read_text(encoding="utf-8"):
                return True
        except FileNotFoundError:
            continue
        except OSError:
            return True
    return False


def pytest_command(job: Job, tests: list[str], shard: str | None, junit: Path, report: Path, workers: int,
                   emulate: str | None, root: Path | None = None) -> list[str]:
    files = sorted({t.split("::")[0] for t in tests})
    cmd = [sys.executable, "-m", "pytest", "-p", "ci.runner.pytest_plugin", "--ci-job", job.id]
    if root is not None and not uses_hypothesis(root, files):
        cmd += ["-p", f"no:{HYPOTHESIS_PLUGIN}"]
    if shard:
        cmd += ["--ci-shard", shard]
    if emulate:
        cmd += ["--ci-emulate", emulate]
    cmd += [*files, f"--junitxml={junit}", "-o", f"junit_suite_name={job.id}", f"--ci-report={report}",
            "-p", "no:cacheprovider", "-q", "-rfEs"]
    if workers > 1 and importlib.util.find_spec("xdist") is not None:
        cmd += ["-n", str(workers)]
    return cmd


# -- the job's report stream ------------------------------------------------------------------
def read_report(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    events = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue   # a line cut off by a kill
    return events


PHASES = ("start", "collection", "tests", "exit")


def phases(events: list[dict], launched: float, ended: float) -> dict[str, float]:
    """Wall seconds of a job's process: start (launch -> the plugin configured: interpreter, pytest,
    plugins), collection (-> the first test starts: test modules with torch, xdist workers), tests
    (-> the verdict) and exit; from the report stream's timestamps (a phase it lacks is left out)."""
    marks = [launched]
    configured = next((e["t"] for e in events if e.get("event") == "configured" and "t" in e), None)
    first = next((e["t"] for e in events if e.get("event") == "start" and "t" in e), None)
    finish = next((e["t"] for e in events if e.get("event") == "finish" and "t" in e), None)
    out = {}
    for name, mark in zip(PHASES, (configured, first, finish, ended)):
        if mark is None:
            continue
        out[name] = round(max(0.0, mark - marks[-1]), 3)
        marks.append(mark)
    return out


def judge(outcome: Outcome, events: list[dict], stopped: str | None) -> None:
    """The job's verdict from pytest's exit code, the plugin's report stream and how the process ended."""
    rc = outcome.rc
    finish = next((e for e in reversed(events) if e.get("event") == "finish"), None)
    att = next((e for e in events if e.get("event") == "attestation"), None)
    if att:
        outcome.attestation = list(att.get("lines", []))
        props = att.get("properties", {})
        if props.get("emulated", "no") != "no":
            outcome.emulation = props["emulated"]
    results = {e["node"]: e for e in events if e.get("event") == "result"}
    started = [e["node"] for e in events if e.get("event") == "start"]
    unfinished = [n for n in dict.fromkeys(started) if n not in results]
    if stopped or finish is None or finish.get("interrupted"):
        selected = [n for e in events if e.get("event") == "selected" for n in e.get("tests", [])]
        outcome.unfinished = unfinished
        seen = set(started) | set(results)
        outcome.not_started = [n for n in dict.fromkeys(selected) if n not in seen]
    if finish:
        outcome.counts = {k: int(finish.get("counts", {}).get(k, 0)) for k in COUNT_KEYS}
        outcome.problems += finish.get("problems", [])
        outcome.notes += finish.get("notes", [])
        outcome.flaky = finish.get("flaky", [])
        outcome.failures = finish.get("failures", [])
    else:
        counts = {k: 0 for k in COUNT_KEYS}
        for r in results.values():
            counts[r["outcome"] if r["outcome"] in counts else "skipped"] += 1
        outcome.counts = counts
        outcome.failures = [{"node": n, "outcome": r["outcome"], "message": r.get("message", "")}
                            for n, r in results.items() if r["outcome"] in ("failed", "error")]
        how = stopped or (f"pytest was killed by {signal.Signals(-rc).name}" if rc < 0 else f"pytest exited {rc}")
        if not events:
            outcome.problems.append(f"{how} before the ci plugin reported anything (see the log above: "
                                    "a usage error, a crash at start-up, or the plugin not loaded)")
        else:
            outcome.problems.append(f"{how} before the job finished: {len(results)} test(s) reported"
                                    + (f"; running when it stopped: {', '.join(unfinished[:3])}" if unfinished else ""))
            for node in unfinished:
                outcome.failures.append({"node": node, "outcome": "error",
                                         "message": f"did not finish: {how}"})
    if finish and stopped:
        outcome.problems.append(f"stopped: {stopped}"
                                + (f"; running when it stopped: {', '.join(unfinished[:3])}" if unfinished else ""))
        outcome.failures += [{"node": n, "outcome": "error", "message": f"did not finish: {stopped}"}
                             for n in unfinished if n not in {f["node"] for f in outcome.failures}]
    if outcome.not_started:
        more = ", ..." if len(outcome.not_started) > 3 else ""
        outcome.problems.append(f"{len(outcome.not_started)} selected test(s) never started: "
                                + ", ".join(outcome.not_started[:3]) + more)
    if rc == 5 and not outcome.problems:
        outcome.problems.append("pytest collected no test (exit 5): an empty selection must fail, not pass")
    elif rc in (2, 3, 4) and finish is None and events:
        outcome.problems.append(f"pytest exit {rc} (interrupted, internal or usage error); see the log above")
    if rc == 0 and outcome.problems:
        outcome.rc = 1
    if rc != 0 and not outcome.problems and not outcome.failures:
        outcome.problems.append(f"pytest exit {rc}; see the log above")
    outcome.slowest = sorted(((r.get("seconds", 0.0), n) for n, r in results.items()), reverse=True)[:5]


def final_junit(pytest_junit: Path, outcome: Outcome, events: list[dict]) -> bytes:
    """The job's JUnit: pytest's, with the stop added when pytest was stopped (the unfinished tests as failures,
    the not-started ones as skipped, a ``ci/job-finished`` failure); the runner's own when pytest left none."""
    results = {e["node"]: e for e in events if e.get("event") == "result"}
    try:
        tree = ET.parse(pytest_junit) if pytest_junit.is_file() and pytest_junit.stat().st_size else None
    except ET.ParseError:
        tree = None       # cut off by a kill
    if tree is None:
        return fallback_junit(outcome, results)
    if outcome.stopped or outcome.unfinished or outcome.not_started:
        root = tree.getroot()
        suite = root if root.tag == "testsuite" else root.find("testsuite")
        if suite is not None:
            _add_stop(suite, outcome)
    return ET.tostring(tree.getroot(), encoding="utf-8", xml_declaration=True)


def _case(suite: ET.Element, node: str) -> ET.Element:
    path, _, name = node.partition("::")
    return ET.SubElement(suite, "testcase", classname=path.replace("/", ".").removesuffix(".py"), name=name)


def _add_stop(suite: ET.Element, outcome: Outcome) -> None:
    """Mark the stop in a JUnit suite: property ``ci.stopped``, the unfinished and not-started tests, and
    a ``ci/job-finished`` failure carrying the problems."""
    props = suite.find("properties")
    if props is None:
        props = ET.Element("properties")
        suite.insert(0, props)
    ET.SubElement(props, "property", name="ci.stopped", value=outcome.stopped or "pytest did not finish")
    for case in [c for c in suite.findall("testcase") if not c.get("name")]:
        suite.remove(case)         # pytest's placeholder for the test the interrupt cut off (named below)
    how = outcome.stopped or "pytest did not finish"
    for node in outcome.unfinished:
        ET.SubElement(_case(suite, node), "failure", message=f"did not finish: {how}")
    for node in outcome.not_started:
        ET.SubElement(_case(suite, node), "skipped", message=f"not started: {how}")
    case = ET.SubElement(suite, "testcase", classname="ci", name="job-finished")
    ET.SubElement(case, "failure", message="; ".join(outcome.problems)[:1000])
    added = len(outcome.unfinished) + len(outcome.not_started) + 1
    for attr, extra in (("tests", added), ("failures", len(outcome.unfinished) + 1),
                        ("skipped", len(outcome.not_started))):
        with contextlib.suppress(ValueError):
            suite.set(attr, str(int(suite.get(attr, "0")) + extra))


def fallback_junit(outcome: Outcome, results: dict[str, dict]) -> bytes:
    """pytest left no JUnit (killed): what the report stream knows, the stop as a failure."""
    suite = ET.Element("testsuite", name=outcome.job_id, tests=str(len(results) + 1))
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="ci.written-by", value="ci.runner.run_suite (pytest left no JUnit)")
    for i, text in enumerate(outcome.problems, 1):
        ET.SubElement(props, "property", name=f"ci.problem.{i}", value=text)
    for node, r in results.items():
        path, _, name = node.partition("::")
        case = ET.SubElement(suite, "testcase", classname=path.replace("/", ".").removesuffix(".py"), name=name,
                             time=str(r.get("seconds", 0.0)))
        if r["outcome"] in ("failed", "error"):
            ET.SubElement(case, "failure", message=r.get("message", "")[:500])
        elif r["outcome"] in ("skipped", "xfail-not-run"):
            ET.SubElement(case, "skipped", message=r.get("message", "")[:500])
    for failure in outcome.failures:
        if failure["node"] not in results:
            ET.SubElement(_case(suite, failure["node"]), "failure", message=failure["message"])
    for node in outcome.not_started:
        ET.SubElement(_case(suite, node), "skipped", message=f"not started: {outcome.stopped or 'pytest was killed'}")
    case = ET.SubElement(suite, "testcase", classname="ci", name="job-finished")
    ET.SubElement(case, "failure", message="; ".join(outcome.problems)[:1000])
    root = ET.Element("testsuites")
    root.append(suite)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


# -- summaries --------------------------------------------------------------------------------
def summary_markdown(outcome: Outcome) -> str:
    verdict = "PASS" if outcome.ok else "FAIL"
    c = outcome.counts
    lines = [f"### {verdict}: `{outcome.job_id}` shard {outcome.shard}", ""]
    if outcome.emulation:
        lines += [f"> **EMULATION**: {outcome.emulation}", ""]
    if outcome.attestation:
        lines += [f"- {line.removeprefix('[ci] ')}" for line in outcome.attestation] + [""]
    lines += [
        "| passed | flaky | failed | errors | skipped (registered) | skipped (unregistered) | xfailed | not run "
        "| seconds |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        "| " + " | ".join(str(c.get(k, 0)) for k in COUNT_KEYS) + f" | {outcome.seconds:.1f} |",
        "",
    ]
    if outcome.problems:
        lines += ["**Problems**", ""] + [f"- {p}" for p in outcome.problems] + [""]
    if outcome.failures:
        lines += ["**Failed tests**", ""] + [
            f"- `{f['node']}`: {f.get('message', '')[:200]}" for f in outcome.failures[:30]] + [""]
    if outcome.unfinished or outcome.not_started:
        lines += [f"**Unfinished** ({outcome.stopped or 'pytest did not finish'})", ""]
        lines += [f"- started, no result: `{n}`" for n in outcome.unfinished[:30]]
        lines += [f"- not started: `{n}`" for n in outcome.not_started[:30]]
        hidden = max(0, len(outcome.unfinished) - 30) + max(0, len(outcome.not_started) - 30)
        lines += ([f"- ... and {hidden} more"] if hidden else []) + [""]
    if outcome.flaky:
        lines += (["**Flaky** (failed, then passed on a registered rerun)", ""]
                  + [f"- `{n}`" for n in outcome.flaky] + [""])
    notes = [n for n in outcome.notes if not any(n in a for a in outcome.attestation)]
    if notes:
        lines += ["**Notes**", ""] + [f"- {n}" for n in notes] + [""]
    if outcome.slowest:
        lines += ["<details><summary>slowest tests</summary>", ""] + [
            f"- {s:.2f}s `{n}`" for s, n in outcome.slowest] + ["", "</details>", ""]
    return "\n".join(lines)


def totals_lines(outcomes: list[Outcome]) -> list[str]:
    """Jobs and tests counted separately (a job can fail with every test passing: accounting)."""
    jobs_ok = sum(1 for o in outcomes if o.ok)
    c = {k: sum(o.counts.get(k, 0) for o in outcomes) for k in COUNT_KEYS}
    tests = (f"tests: {c['passed']} passed, {c['flaky']} flaky, {c['failed'] + c['error']} failed, "
             f"{c['skipped']} skipped, {c['skipped-unregistered']} skipped without a registered reason, "
             f"{c['xfailed']} xfailed, {c['not-run']} not run")
    return [f"jobs: {jobs_ok} passed, {len(outcomes) - jobs_ok} failed", tests]


def combined_summary(title: str, outcomes: list[Outcome]) -> str:
    verdict = "PASS" if outcomes and all(o.ok for o in outcomes) else "FAIL"
    head = [f"## {verdict}: {title}", ""] + [f"**{line}**  " for line in totals_lines(outcomes)] + [""]
    return "\n".join(head + [summary_markdown(o) for o in outcomes])


def publish(text: str, path: Path | None, *, echo: bool = True) -> None:
    """Write the Markdown summary to ``path``, append it to $GITHUB_STEP_SUMMARY, else print it (``echo``)."""
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target:
        with open(target, "a", encoding="utf-8") as fh:
            fh.write(text + "\n")
    elif echo:
        print(text)
    elif path is not None:
        print(f"[ci] Markdown summary: {path}")


# -- one job ---------------------------------------------------------------------------------
def job_workers(job: Job, tests: list[str], workers: int | None = None) -> int:
    """The pytest-xdist worker count a job's process gets: ``workers`` when given, else the hardware's when the
    selected tests' estimate is worth the workers' start-up, else 1."""
    if workers is not None:
        return workers
    chosen = set(tests)
    est = sum(t.est_time for t in job.tests if t.node_id in chosen)
    return job.hardware.workers if est >= XDIST_MIN_EST_S else 1


def thread_budget(env: dict[str, str], cores: int | None, workers: int) -> int | None:
    """Set OMP_NUM_THREADS in ``env`` to the job's cores over its pytest processes (at least 1) and return it;
    None (``env`` untouched) when the caller's environment already sets it. torch's intra-op threads
    spin while they wait: two processes on two cores, each with two threads, ran a CPU e2e job 6x slower
    (83 s against 13 s wall) than with one thread each."""
    if "OMP_NUM_THREADS" in env:
        return None
    threads = max(1, (cores or os.cpu_count() or 1) // max(workers, 1))
    env["OMP_NUM_THREADS"] = str(threads)
    return threads


@dataclass(frozen=True)
class JobFiles:
    """A job shard's outputs in its results folder, and the temporary names they are written under."""
    folder: Path
    tag: str

    def final(self, kind: str) -> Path:
        return self.folder / {"junit": f"junit-{self.tag}.xml", "report": f"report-{self.tag}.jsonl",
                              "durations": f"durations-{self.tag}.json", "summary": f"summary-{self.tag}.md",
                              "log": f"log-{self.tag}.txt"}[kind]

    def partial(self, kind: str) -> Path:
        """Where pytest (JUnit), the plugin (report stream) and the log write while the job runs."""
        return self.folder / f".{self.final(kind).name}.partial"

    def prepare(self) -> None:
        """Refuse a final path that is a symlink (one line); remove stale outputs and partials of a killed run."""
        kinds = ("junit", "report", "durations", "summary", "log")
        for kind in kinds:
            if self.final(kind).is_symlink():
                raise UnsafeOutput(f"{self.final(kind)}: is a symlink; refusing to write through it "
                                   "(remove it or choose another --results folder)")
        for kind in kinds:
            self.partial(kind).unlink(missing_ok=True)
        for kind in ("junit", "report"):
            self.final(kind).unlink(missing_ok=True)

    def publish(self, kind: str, data: str | bytes) -> None:
        write_atomic(self.final(kind), data)
        self.partial(kind).unlink(missing_ok=True)


def run_job(registry: Registry, job: Job, tests: list[str], shard: str | None, *, results_dir: Path,
            emulate: str | None = None, workers: int | None = None, job_timeout: float | None = None,
            pytest_args: list[str] | None = None, kill_grace: float = KILL_GRACE_S,
            out: TextIO | None = None, stop: StopFlag | None = None, cores: int | None = None) -> Outcome:
    """One job's pytest process. With ``out`` (a concurrent run), the runner's lines go to ``out`` and pytest's
    output to ``ci-results/<job>/log-<shard>.txt``, copied whole into ``out`` when the process ended.
    ``cores``: the cores this job may use (None: the machine's), shared by its pytest processes' threads.
    Raises :class:`UnsafeOutput` (before pytest starts) when an output path is a symlink."""
    root = registry.root
    say = out or sys.stdout
    shown_shard = shard or "1/1"
    files = JobFiles(results_dir / sanitize(job.id), shown_shard.replace("/", "-of-"))
    files.folder.mkdir(parents=True, exist_ok=True)
    files.prepare()
    print(f"\n[ci] === job {job.id} shard {shown_shard}: {len(tests)} registered test node(s) ===", file=say,
          flush=True)
    if emulate:
        print(banner(f"EMULATION: {job.id} runs with DSPARK_PLATFORM={emulate} on this machine, "
                     f"not on real {job.key.hardware} hardware"), file=say, flush=True)
    env = job_environment(job, root=root, emulate=emulate, out=say)
    workers = job_workers(job, tests, workers)
    threads = thread_budget(env, cores, workers)
    if threads:
        print(f"[ci] OMP_NUM_THREADS={threads} per pytest process ({cores or os.cpu_count()} core(s), "
              f"{workers} worker(s))", file=say, flush=True)
    cmd = pytest_command(job, tests, shard, files.partial("junit"), files.partial("report"), workers, emulate,
                         root) + list(pytest_args or [])
    print("[ci] " + " ".join(cmd), file=say, flush=True)
    if job_timeout is None:
        by_test = {t.node_id: t for t in job.tests}
        job_timeout = 120.0 + 2.0 * sum(by_test[n].per_test_timeout for n in tests if n in by_test)
    start, launched = time.monotonic(), time.time()
    scratch = tempfile.mkdtemp(prefix="dspark-job-")   # the process's TMPDIR: torch's pytorch-errorfile-* too
    env.update(TMPDIR=scratch, TEMP=scratch, TMP=scratch)
    try:
        if out is None:
            rc, stopped, cpu = run_process(cmd, cwd=root, env=env, timeout=job_timeout, grace=kill_grace, stop=stop)
        else:
            fd = os.open(files.partial("log"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
            with open(fd, "w", encoding="utf-8") as log:
                rc, stopped, cpu = run_process(cmd, cwd=root, env=env, timeout=job_timeout, grace=kill_grace,
                                                log=log, stop=stop)
            text = files.partial("log").read_text(encoding="utf-8", errors="replace")
            out.write(text)
            files.publish("log", text)
        outcome = Outcome(job.id, shown_shard, rc, time.monotonic() - start, stopped=stopped)
        outcome.cpu_seconds = cpu
        events = read_report(files.partial("report"))
        outcome.phases = phases(events, launched, time.time())
        judge(outcome, events, stopped)
        files.publish("junit", final_junit(files.partial("junit"), outcome, events))
        report = files.partial("report")
        files.publish("report", report.read_bytes() if report.is_file() else b"")
        durations = {}
        for e in events:
            if e.get("event") == "result" and e.get("registration"):
                durations[e["registration"]] = round(durations.get(e["registration"], 0.0) + e.get("seconds", 0.0),
                                                     3)
        files.publish("durations", json.dumps(durations, indent=1, sort_keys=True) + "\n")
        files.publish("summary", summary_markdown(outcome))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        for kind in ("junit", "report", "log"):
            files.partial(kind).unlink(missing_ok=True)
    for problem in outcome.problems:
        print(f"[ci] FAIL {job.id} shard {shown_shard}: {problem}", file=out or sys.stderr, flush=True)
    return outcome


def run_selection(registry: Registry, selection: list[tuple[Job, list[str]]], shard: str | None, *,
                  results_dir: Path, emulate: str | None = None, workers: int | None = None,
                  job_timeout: float | None = None, pytest_args: list[str] | None = None,
                  kill_grace: float = KILL_GRACE_S, stop: StopFlag | None = None) -> list[Outcome]:
    outcomes = []
    for job, tests in selection:
        if stop is not None and stop.is_set():
            break
        outcomes.append(run_job(registry, job, tests, shard, results_dir=results_dir, emulate=emulate,
                                workers=workers, job_timeout=job_timeout, pytest_args=pytest_args,
                                kill_grace=kill_grace, stop=stop))
        if outcomes[-1].runner_signalled:
            break            # SIGTERM / SIGINT to the runner stops the run, not just the job in flight
    return outcomes


def hold_results(results_dir: Path, shards: list[tuple[Job, str | None]]) -> contextlib.ExitStack:
    """Lock each (job, group shard)'s results in ``results_dir`` for this run; :class:`LockRefused` (one line)
    when another run holds one. Two shards of one job lock apart (their files differ); the caller exits it."""
    stack = contextlib.ExitStack()
    try:
        for job_id, shard in dict.fromkeys((job.id, shard) for job, shard in shards):
            folder = results_dir / sanitize(job_id)
            folder.mkdir(parents=True, exist_ok=True)
            tag = (shard or "1/1").replace("/", "-of-")
            stack.enter_context(hold(folder / f".lock-{tag}", f"{folder} (job {job_id} shard {shard or '1/1'})"))
    except BaseException:
        stack.close()
        raise
    return stack


def emulation_for(jobs: list[Job], value: str | None) -> str | None:
    """``--emulate`` alone means each GPU job's own backend; the cpu label is never emulated."""
    if value is None:
        return None
    if value == "auto":
        backends = {j.hardware.backend for j in jobs if j.hardware.is_gpu}
        if len(backends) != 1:
            raise ValueError("--emulate: give the platform (hip or cuda): "
                             + ("no GPU job is selected" if not backends else f"the jobs span {sorted(backends)}"))
        return backends.pop()
    return value


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line, with --workers and --job-timeout checked."""
    parser = argparse.ArgumentParser(prog="python -m ci.runner.run_suite", description=__doc__.split("\n\n")[0])
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--group", help="group id schedule/hardware, e.g. per-commit/cpu (what a GitHub job runs)")
    what.add_argument("--job", help="one job id, e.g. per-commit/cpu/kernels")
    parser.add_argument("--shard", help="I/N: shard I of N of the group (default: the whole group / job)")
    parser.add_argument("--dry-run", action="store_true",
                        help="list what would run (and the env changes); fail if nothing")
    parser.add_argument("--root", default=".", help="repository root (default: .)")
    parser.add_argument("--results", help=f"results directory (default: ROOT/{RESULTS_DIR})")
    parser.add_argument("--emulate", nargs="?", const="auto", choices=(*EMULATED_PLATFORMS, "auto"),
                        help="run GPU jobs here with DSPARK_PLATFORM emulated (announced in banner, JUnit, summary)")
    parser.add_argument("--workers", type=int, help="override the hardware's pytest-xdist worker count (>= 1)")
    parser.add_argument("--job-timeout", type=float, help="seconds before a job's pytest is stopped "
                        "(default: 120 + 2 x the sum of its per-test timeouts)")
    parser.add_argument("--kill-grace", type=float, default=KILL_GRACE_S,
                        help=f"seconds between SIGINT and SIGKILL when stopping pytest (default {KILL_GRACE_S:.0f})")
    parser.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 1:
        parser.error(f"--workers must be >= 1, got {args.workers}")
    if args.job_timeout is not None and args.job_timeout <= 0:
        parser.error(f"--job-timeout must be > 0, got {args.job_timeout}")
    return args


@dataclass(frozen=True)
class _Plan:
    """What one invocation runs: the group shard ("I/N" or None), a title and (job, node ids) pairs."""
    registry: Registry
    shard: str | None
    title: str
    selection: list[tuple[Job, list[str]]]
    emulate: str | None


def _plan(args: argparse.Namespace, root: Path) -> _Plan:
    """Load the registry and select the tests of ``--group``/``--job`` (raises on a bad id, shard or catalog)."""
    shard = None
    if args.shard is not None:
        index, count = parse_shard(args.shard)
        shard = f"{index}/{count}"
    registry = load_registry(root)
    if args.group:
        parse_group_id(args.group)
        group = registry.group(args.group)
        title = f"group `{group.id}` shard {shard or '1/1'}"
        selection = registry.group_shard(group.id, *(parse_shard(shard) if shard else (1, 1)))
        jobs = group.jobs
    else:
        job = registry.job(args.job)
        title = f"job `{job.id}` shard {shard or '1/1'}"
        tests = registry.job_shard(job, *parse_shard(shard)) if shard else [t.node_id for t in job.tests]
        selection = [(job, tests)] if tests else []
        jobs = [job]
    return _Plan(registry, shard, title, selection, emulation_for(jobs, args.emulate))


def _dry_run(plan: _Plan, root: Path) -> int:
    """Print each job's node ids, estimate and environment changes instead of running them."""
    for job, tests in plan.selection:
        est = sum(t.est_time for t in job.tests if t.node_id in set(tests))
        print(f"# {job.id} shard {plan.shard or '1/1'}: {len(tests)} node id(s), est {est:.0f}s")
        job_environment(job, root=root, emulate=plan.emulate)
        print("\n".join(tests))
    return 0


def _run(plan: _Plan, args: argparse.Namespace, root: Path, stop: StopFlag) -> int:
    """Run the selection under its results locks, publish the combined summary and return the exit status."""
    shard = plan.shard
    job_shard = shard if (args.group or shard) else None
    results = Path(args.results).resolve() if args.results else root / RESULTS_DIR
    started = time.monotonic()
    try:
        with hold_results(results, [(job, job_shard) for job, _ in plan.selection]):
            outcomes = run_selection(plan.registry, plan.selection, job_shard, results_dir=results,
                                     emulate=plan.emulate, workers=args.workers, job_timeout=args.job_timeout,
                                     pytest_args=args.pytest_args, kill_grace=args.kill_grace, stop=stop)
            text = combined_summary(f"{plan.title} ({time.monotonic() - started:.0f}s)", outcomes)
            tag = (shard or "1/1").replace("/", "-of-")
            publish(text, results / f"summary-{sanitize(args.group or args.job)}-{tag}.md")
    except (LockRefused, UnsafeOutput) as exc:
        print(f"[ci] error: {exc}", file=sys.stderr)
        return 2
    for line in totals_lines(outcomes):
        print(line)
    if stop.is_set():
        print(f"[ci] stopped: {stop.reason}; exit {stop.exit_code}", file=sys.stderr, flush=True)
        return stop.exit_code
    if args.job and outcomes and outcomes[0].rc not in (0, 1):
        return outcomes[0].rc
    return 0 if outcomes and all(o.ok for o in outcomes) else 1


def main(argv: list[str] | None = None) -> int:
    """Run (or with --dry-run list) one group shard or one job; 0 when every job passed."""
    args = _parse_args(argv)
    root = Path(args.root).resolve()
    try:
        plan = _plan(args, root)
    except (CollectionError, CatalogError, DurationsError, KeyError, ValueError, OSError) as exc:
        print(f"[ci] error: {exc.args[0] if isinstance(exc, KeyError) else exc}", file=sys.stderr)
        return 2
    if not plan.selection:
        print(f"[ci] FAIL: {plan.title} selects no test (an empty shard must not pass)", file=sys.stderr)
        return 1
    if args.dry_run:
        return _dry_run(plan, root)
    with stop_on_signals() as stop:
        return _run(plan, args, root, stop)


if __name__ == "__main__":
    sys.exit(main())
