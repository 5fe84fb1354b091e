"""The registry inside pytest: ``pytest --ci-job ID [--ci-shard I/N]`` runs exactly one job.

Loaded by the root ``conftest.py`` (``pytest_plugins = ["ci.runner.pytest_plugin"]``) and by the
runner (``-p ci.runner.pytest_plugin``). This module only adds the options and the hookspecs
(``ci.runner.pytest_hookspecs``) and, at configure time, builds one :class:`CiPytestPlugin` per
process (its state: the suite index and the job, no module globals) and registers it with
the plugin manager as ``dspark-ci``; pytest's private JUnit writer is reached only through
``ci.runner.junit_shim``. It may import pytest; it imports torch only through
:func:`ci.runner.machine.detect` (inside the job's pytest process), never impl/ or test code.
What it does:

- registers one marker per suite (``pytest -m kernels`` works with --strict-markers)
  and puts each registered test under its suites' markers;
- with ``--ci-job``: sets the job's hermetic gate environment (printing each stray
  variable it removes and every gate's effective value), attests the machine
  against the label (``ci.runner.attest``; ``--ci-emulate`` announced), selects exactly the
  job's tests of that group shard, gives each its timeout (pytest-timeout) and, when
  registered with ``retries=N``, its reruns (pytest-rerunfailures);
- accounts for every test: a test counts only when its body ran; the job fails when
  attestation fails, a registration collected no test, anything else deselected one
  of the job's tests, one test matches two registrations, a test skipped without a
  registered reason (or is an xfail that never runs), a parameter set came out empty,
  a selected test produced no result, or no registered test body ran at all;
- names the JUnit suite after the job and writes attestation, machine, emulation
  and accounting into its properties; ``--ci-report FILE`` streams JSON lines
  (attestation, each start and result, the verdict) that survive a killed process.
"""
from __future__ import annotations

import json
import os
import re
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from ci.registry.durations import REGISTRATION_PROPERTY
from ci.runner.junit_shim import add_suite_property, drop_testcases, junit_writer
from ci.registry.skip_reasons import is_registered_skip, registered_skip_keys, unregistered_skip_remedy

RERUN_ATTEMPT_PROPERTY = "ci.failed-attempt"
EMPTY_PARAMSET = "got empty parameter set"
_SKIP_PREFIX = re.compile(r"^Skipped:\s*")


PLUGIN_NAME = "dspark-ci"
PLAN_KEY = "dspark_ci_plan"


def pytest_addhooks(pluginmanager):
    from ci.runner.pytest_hookspecs import CiHookSpecs

    pluginmanager.add_hookspecs(CiHookSpecs)


def pytest_addoption(parser):
    group = parser.getgroup("dspark-ci", "dspark registry (ci.runner.pytest_plugin)")
    group.addoption("--ci-job", metavar="ID",
                    help="run exactly the tests of registry job ID (schedule/hardware/suite[variant])")
    group.addoption("--ci-shard", metavar="I/N", help="only the tests of --ci-job that shard I/N of its group holds")
    group.addoption("--ci-emulate", choices=("hip", "cuda"),
                    help="run a GPU label's job here with DSPARK_PLATFORM emulated (announced everywhere)")
    group.addoption("--ci-report", metavar="FILE", help="stream JSON lines: attestation, results, verdict")


# -- registrations and node ids ------------------------------------------------------
def covers(reg_node: str, item_node: str) -> bool:
    """Does a registration's node id (function, class, method) cover a pytest item id?"""
    return item_node == reg_node or item_node.startswith((reg_node + "::", reg_node + "["))


def _skip_message(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return _SKIP_PREFIX.sub("", str(longrepr[2]))
    return _SKIP_PREFIX.sub("", str(longrepr or ""))


class ItemResult:
    __slots__ = ("done", "message", "node", "outcome", "pending_rerun", "ran", "registration", "reruns", "seconds")

    def __init__(self, node: str, registration: str | None):
        self.node, self.registration = node, registration
        self.outcome, self.ran, self.reruns, self.message, self.seconds = "none", False, 0, "", 0.0
        self.done = self.pending_rerun = False


class JobState:
    """State of one ``--ci-job`` session (controller or single process; xdist workers select only)."""

    def __init__(self, config, job_id: str, regs: dict, shard: str, root: Path, registry=None, job=None):
        self.config = config
        self.job_id = job_id
        self.registry = registry        # None on an xdist worker (it gets the plan from the controller)
        self.job = job
        self.shard = shard
        self.worker = hasattr(config, "workerinput")
        self.selected_regs = regs       # node id -> ci.registry.jobs.JobTest
        self.problems: list[str] = []
        self.notes: list[str] = []
        self.expected: list[str] = []                # item ids this job runs
        self.results: dict[str, ItemResult] = {}
        self.attestation = None
        self.report_path = config.getoption("ci_report")
        self._mine: set[str] = set()
        self._start = time.monotonic()
        self.skip_keys = set() if self.worker else _skip_keys(root)

    # -- report stream -------------------------------------------------------------
    def emit(self, event: str, **data) -> None:
        if not self.report_path or self.worker:
            return
        with open(self.report_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"event": event, "t": round(time.time(), 3), **data}, sort_keys=True) + "\n")
            fh.flush()

    def problem(self, text: str) -> None:
        if text not in self.problems:
            self.problems.append(text)

    # -- environment + attestation ------------------------------------------------------
    def prepare(self) -> None:
        from ci.runner.attest import attest
        from ci.runner.jobenv import hermetic_env, job_wanted_env, read_gates
        from ci.runner.machine import Machine, detect

        config = self.config
        emulate = config.getoption("ci_emulate")
        if self.worker:      # the controller attested; workers inherit its environment
            return
        self.emit("configured")
        hooked = config.hook.pytest_ci_machine(config=config)
        if hooked is not None:
            machine = hooked if isinstance(hooked, Machine) else Machine.from_mapping(hooked)
            if machine.source == "probed":
                machine = Machine(**{**asdict(machine), "source": "the pytest_ci_machine hook (a conftest)"})
        else:
            machine = detect(import_torch=bool(emulate) or self.job.hardware.is_gpu)
        hw = self.job.hardware
        base_env = hw.env
        if emulate:
            host = self.registry.catalog.hardware.get(machine.label)
            base_env = host.env if host is not None else {}
        wanted = job_wanted_env(base_env, self.job.env, job_id=self.job.id, hardware=self.job.key.hardware,
                                emulate=emulate)
        jobenv = hermetic_env(os.environ, wanted, read_gates(self.registry.root))
        for line in jobenv.removal_lines():
            print(line, flush=True)
        for var in jobenv.removed:
            os.environ.pop(var, None)
        os.environ.update(wanted)
        gate_wanted = {k: v for k, v in wanted.items() if k not in ("DSPARK_JOB", "DSPARK_HARDWARE")}
        self.attestation = attest(self.job.id, hw, machine, dict(os.environ), expected_env=gate_wanted,
                                  variant_env=self.job.env, emulate=emulate,
                                  toolchain=getattr(hw, "toolchain", None))
        print(f"[ci] job {self.job.id} shard {self.shard}: {len(self.selected_regs)} registered test node(s); "
              "effective gates:", flush=True)
        print("\n".join(jobenv.gate_lines()), flush=True)
        for line in self.attestation.lines():
            print(("!!! " if line.startswith("[ci] EMULATION") else "") + line, flush=True)
        self.notes += self.attestation.notes
        if not config.pluginmanager.hasplugin("timeout"):
            self.notes.append("pytest-timeout is not installed: per-test timeouts are OFF for this run")
        if any(t.retries for t in self.selected_regs.values()) and not config.pluginmanager.hasplugin("rerunfailures"):
            self.notes.append("pytest-rerunfailures is not installed: registered retries are OFF (each test runs once)")
        for note in self.notes[len(self.attestation.notes):]:
            print(f"[ci] WARNING: {note}", flush=True)
        self.emit("attestation", ok=self.attestation.ok, lines=self.attestation.lines(),
                  properties=self.attestation.properties(), job=self.job.id, shard=self.shard)
        if not self.attestation.ok:
            self.problem(self.attestation.failure_line())
            config.option.dist = "no"          # do not start xdist workers for a job that will not run
            config.option.numprocesses = None

    def junit_setup(self) -> None:
        xml = junit_writer(self.config)
        if xml is None:
            return
        if xml.suite_name == "pytest":
            xml.suite_name = self.job.id
        props = {"ci.shard": self.shard, **self.attestation.properties()}
        for i, note in enumerate(self.notes, 1):
            props.setdefault(f"ci.note.{i}", note)
        for name, value in props.items():
            add_suite_property(xml, name, value)

    # -- selection ----------------------------------------------------------------------
    def select(self, items: list) -> None:
        """Keep exactly the job's items (tryfirst: before -k / -m / --deselect / other plugins)."""
        keep, drop = [], []
        per_reg: dict[str, int] = {r: 0 for r in self.selected_regs}
        timeouts = self.config.pluginmanager.hasplugin("timeout")
        reruns = self.config.pluginmanager.hasplugin("rerunfailures")
        for item in items:
            regs = [r for r in self.selected_regs if covers(r, item.nodeid)]
            if not regs:
                drop.append(item)
                continue
            if len(regs) > 1:
                self.problem(f"{item.nodeid}: one test matches {len(regs)} registrations of this job "
                             f"({', '.join(self.selected_regs[r].where for r in regs)}); register it once")
            reg = self.selected_regs[max(regs, key=len)]
            per_reg[reg.node_id] += 1
            item.user_properties.append((REGISTRATION_PROPERTY, reg.node_id))
            if timeouts:
                item.add_marker(pytest.mark.timeout(reg.per_test_timeout, method="signal"))
            if reg.retries and reruns:
                item.add_marker(pytest.mark.flaky(reruns=reg.retries))
            keep.append(item)
        for node, count in sorted(per_reg.items()):
            if count == 0:
                self.problem(f"{node} (registered at {self.selected_regs[node].where}): pytest collected no test "
                             "for this registration (not collectable, renamed, or its parameters vanished)")
        if drop:
            self.config.hook.pytest_deselected(items=drop)
        items[:] = keep
        self._mine = {i.nodeid for i in keep}

    def check_final(self, items: list) -> None:
        final = {i.nodeid for i in items}
        gone = sorted(self._mine - final)
        for node in gone[:20]:
            self.problem(f"{node}: a test of this job was deselected (-k, -m, --deselect or a plugin); "
                         "a CI job runs all of its tests")
        if len(gone) > 20:
            self.problem(f"... and {len(gone) - 20} more deselected tests")
        self.expect([i.nodeid for i in items])

    def expect(self, ids: list[str]) -> None:
        new = [i for i in ids if i not in self.results]
        for node in new:
            self.results[node] = ItemResult(node, self.registration_of(node))
        self.expected += new
        if new:
            self.emit("selected", tests=new)

    def registration_of(self, node: str) -> str | None:
        regs = [r for r in self.selected_regs if covers(r, node)]
        return max(regs, key=len) if regs else None

    # -- results --------------------------------------------------------------------------
    def record(self, report) -> None:
        res = self.results.get(report.nodeid)
        if res is None:
            res = self.results[report.nodeid] = ItemResult(report.nodeid, self.registration_of(report.nodeid))
        res.seconds += getattr(report, "duration", 0.0) or 0.0
        if report.outcome == "rerun":
            res.reruns += 1
            res.pending_rerun = True
            return
        if report.when == "setup":
            res.pending_rerun = False
            res.outcome, res.ran, res.message = "none", False, ""
            if report.failed:
                res.outcome, res.message = "error", _message(report)
            elif report.skipped:
                res.outcome = "xfail-not-run" if hasattr(report, "wasxfail") else "skipped"
                res.message = _skip_message(report) if not hasattr(report, "wasxfail") else str(report.wasxfail)
        elif report.when == "call":
            if hasattr(report, "wasxfail") and report.skipped:
                res.outcome, res.ran, res.message = "xfailed", True, str(report.wasxfail)
            elif report.skipped:
                res.outcome, res.message = "skipped", _skip_message(report)
            elif report.failed:
                res.outcome, res.ran, res.message = "failed", True, _message(report)
            else:
                res.outcome, res.ran = "passed", True
                if res.reruns:
                    res.outcome = "flaky"
        elif report.when == "teardown":
            if res.pending_rerun:      # the end of a failed attempt: its JUnit entry is dropped at the end
                report.user_properties.append((RERUN_ATTEMPT_PROPERTY, str(res.reruns)))
                return
            if res.outcome == "flaky":
                text = f"passed only on attempt {res.reruns + 1} ({res.reruns} failed attempt(s) before)"
                report.user_properties.append(("flaky", text))
            elif res.reruns:
                report.user_properties.append(("reruns", f"failed all {res.reruns + 1} attempts"))
            if report.failed and res.outcome not in ("failed", "error"):
                res.outcome, res.message = "error", _message(report)
            res.done = True
            self.emit("result", node=res.node, registration=res.registration, outcome=res.outcome, ran=res.ran,
                      reruns=res.reruns, seconds=round(res.seconds, 3), message=res.message[:500])

    # -- verdict ---------------------------------------------------------------------------
    def verdict(self, interrupted: bool) -> dict:
        counts = {k: 0 for k in ("passed", "flaky", "failed", "error", "skipped", "skipped-unregistered", "xfailed",
                                 "not-run")}
        ran = 0
        for node in self.expected or list(self.results):
            res = self.results[node]
            if not res.done and res.outcome != "error":
                if not interrupted and self.attestation.ok:
                    self.problem(f"{node}: selected, but pytest reported no result for it")
                counts["not-run"] += 1
                continue
            key = res.outcome if res.outcome in counts else "skipped"
            if key == "skipped" and not (res.outcome == "skipped" and is_registered_skip(res.message, self.skip_keys)):
                key = "skipped-unregistered"  # the summary's "skipped (registered)" column counts registered ones only
            counts[key] += 1
            ran += res.ran
            if res.outcome == "skipped":
                if res.message.startswith(EMPTY_PARAMSET):
                    self.problem(f"{node}: its parameter list is empty on this machine ({res.message[:160]}); "
                                 "vanished parameters are not a pass")
                elif not is_registered_skip(res.message, self.skip_keys):
                    self.problem(f"unregistered skip: {node}: {res.message[:200]!r} "
                                 f"({unregistered_skip_remedy(res.message)})")
            elif res.outcome == "xfail-not-run":
                self.problem(f"{node}: xfail(run=False) never runs its body: a skip without a registered reason")
        if self.attestation.ok and not interrupted and ran == 0:
            skipped = counts["skipped"] + counts["skipped-unregistered"]
            self.problem(f"no registered test body ran ({len(self.expected)} test(s) selected: "
                         f"{skipped} skipped, {counts['not-run']} without result): this job tested nothing")
        flaky = sorted(n for n, r in self.results.items() if r.outcome == "flaky")
        failures = [{"node": n, "outcome": r.outcome, "message": r.message[:300]}
                    for n, r in self.results.items() if r.outcome in ("failed", "error")]
        return {"counts": counts, "ran": ran, "problems": self.problems, "notes": self.notes, "flaky": flaky,
                "failures": failures, "seconds": round(time.monotonic() - self._start, 3),
                "interrupted": interrupted}


def _message(report) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr or "")
    lines = [ln for ln in text.splitlines() if ln.strip()]
    errs = [ln for ln in lines if ln.startswith("E ")]
    return (errs[-1][1:].strip() if errs else lines[-1] if lines else "")[:500]


def _skip_keys(root: Path) -> set[str]:
    return registered_skip_keys(root)


def _suite_index(registry) -> dict[str, set[str]]:
    index: dict[str, set[str]] = {}
    for reg in registry.collection.registrations:
        index.setdefault(reg.node_id, set()).add(reg.suite)
    return index


def _add_suite_markers(config, suites: dict[str, set[str]]) -> None:
    for suite in sorted(set().union(*suites.values()) if suites else ()):
        config.addinivalue_line("markers", f"{suite}: registered suite {suite} (ci.registration.register)")


# -- the plugin object -----------------------------------------------------------------------
class CiPytestPlugin:
    """The registry inside one pytest process, registered with the plugin manager as ``dspark-ci``.

    ``suites`` maps a registration's node id to its suites (the markers); ``job`` is the
    ``--ci-job`` state, None for a plain run. An xdist worker gets its own instance, built
    from the controller's plan (no second registry load).
    """

    def __init__(self, config, suites: dict[str, set[str]], job: JobState | None):
        self.config = config
        self.suites = suites
        self.job = job

    def _controller_job(self) -> JobState | None:
        return self.job if self.job is not None and not self.job.worker else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """Controller -> each xdist worker: suites and the job's selection (workers load no registry)."""
        job = self.job
        node.workerinput[PLAN_KEY] = {
            "suites": {k: sorted(v) for k, v in self.suites.items()},
            "job": None if job is None else job.job_id,
            "shard": None if job is None else job.shard,
            "tests": None if job is None else [asdict(t) for t in job.selected_regs.values()],
        }

    @pytest.hookimpl(trylast=True)
    def pytest_sessionstart(self, session):
        job = self._controller_job()
        if job is not None:
            job.junit_setup()

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection(self, session):
        job = self._controller_job()
        if job is not None and not job.attestation.ok:
            session.items = []
            return True   # a machine that failed attestation collects nothing
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_collection_modifyitems(self, session, config, items):
        for item in items:
            for reg_node, names in self.suites.items():
                if covers(reg_node, item.nodeid):
                    for name in names:
                        item.add_marker(name)
        if self.job is not None:
            self.job.select(items)

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session):
        if self.job is not None:
            self.job.check_final(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        if self.job is not None:
            self.job.expect(list(ids))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node, error):
        if self.job is not None:
            for text in getattr(node, "workeroutput", {}).get("ci_problems", []):
                self.job.problem(text)

    def pytest_runtest_logstart(self, nodeid, location):
        job = self._controller_job()
        if job is not None:
            job.emit("start", node=nodeid)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        job = self._controller_job()
        if job is not None:
            job.record(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session):
        job = self._controller_job()
        if job is not None and not job.attestation.ok:
            return True    # do not run anything on a machine that is not the label's
        return None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        job = self.job
        if job is None:
            return
        if job.worker:
            session.config.workeroutput["ci_problems"] = list(job.problems)
            return
        if session.config.option.collectonly:
            for text in job.problems:
                print(f"[ci] FAIL {job.job.id}: {text}")
            return
        interrupted = exitstatus in (pytest.ExitCode.INTERRUPTED, pytest.ExitCode.INTERNAL_ERROR)
        verdict = job.verdict(interrupted)
        xml = junit_writer(session.config)
        if xml is not None:
            drop_testcases(xml, RERUN_ATTEMPT_PROPERTY)   # a rerun test is ONE test case, its final attempt
            c = verdict["counts"]
            add_suite_property(xml, "ci.verdict", "FAIL" if (job.problems or exitstatus not in (0,)) else "PASS")
            add_suite_property(xml, "ci.counts", ", ".join(f"{k} {v}" for k, v in c.items()))
            add_suite_property(xml, "ci.flaky", ", ".join(verdict["flaky"]) or "none")
            for i, text in enumerate(job.problems, 1):
                add_suite_property(xml, f"ci.problem.{i}", text)
        if job.problems and session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        job.emit("finish", exitstatus=int(session.exitstatus), **verdict)

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config):
        job = self._controller_job()
        if job is None:
            return
        c = {k: 0 for k in ("passed", "flaky")}
        for res in job.results.values():
            if res.outcome in c:
                c[res.outcome] += 1
        terminalreporter.write_sep("-", f"ci: job {job.job_id} shard {job.shard}")
        if c["flaky"]:
            terminalreporter.write_line(f"[ci] flaky (passed only on a rerun): {c['flaky']}")
        for text in job.problems:
            terminalreporter.write_line(f"[ci] FAIL {job.job_id}: {text}")
        if not job.problems:
            terminalreporter.write_line(f"[ci] accounting OK: {c['passed']} passed, {c['flaky']} flaky")


# -- module hooks: options, and building + registering the plugin object --------------------
@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    plan = getattr(config, "workerinput", {}).get(PLAN_KEY)
    plugin = _worker_plugin(config, plan) if plan is not None else _controller_plugin(config)
    if plugin is not None:
        config.pluginmanager.register(plugin, PLUGIN_NAME)
        if plugin.job is not None and not plugin.job.worker:
            plugin.job.prepare()


def _controller_plugin(config) -> CiPytestPlugin | None:
    from ci.registry.catalog import CatalogError
    from ci.registry.collect import CollectionError
    from ci.registry.jobs import load_registry
    from ci.registry.partition import parse_shard

    job_id = config.getoption("ci_job")
    try:
        registry = load_registry(config.rootpath)
    except (CollectionError, CatalogError, ValueError, OSError) as exc:
        if job_id:
            raise pytest.UsageError(f"--ci-job {job_id}: the registry cannot be read: {exc}") from None
        print(f"[ci] warning: suite markers not registered: the registry cannot be read: {exc}")
        return None
    suites = _suite_index(registry)
    _add_suite_markers(config, suites)
    if not job_id:
        if config.getoption("ci_shard") or config.getoption("ci_emulate"):
            raise pytest.UsageError("--ci-shard / --ci-emulate need --ci-job ID")
        return CiPytestPlugin(config, suites, None)
    try:
        job = registry.job(job_id)
        if config.getoption("ci_shard"):
            index, count = parse_shard(config.getoption("ci_shard"))
            tests, shard = registry.job_shard(job, index, count), f"{index}/{count}"
        else:
            tests, shard = [t.node_id for t in job.tests], "1/1"
    except (KeyError, ValueError) as exc:
        raise pytest.UsageError(f"--ci-job/--ci-shard: {exc.args[0] if isinstance(exc, KeyError) else exc}") from None
    if not tests:
        raise pytest.UsageError(f"--ci-job {job_id} --ci-shard {shard}: selects no test "
                                f"(the job has {len(job.tests)} registered test(s)); an empty selection must not pass")
    chosen = set(tests)
    state = JobState(config, job.id, {t.node_id: t for t in job.tests if t.node_id in chosen}, shard,
                     registry.root, registry, job)
    return CiPytestPlugin(config, suites, state)


def _worker_plugin(config, plan: dict) -> CiPytestPlugin:
    from ci.registry.jobs import JobTest

    suites = {k: set(v) for k, v in plan["suites"].items()}
    _add_suite_markers(config, suites)
    state = None
    if plan["job"]:
        regs = {t["node_id"]: JobTest(**t) for t in plan["tests"]}
        state = JobState(config, plan["job"], regs, plan["shard"], config.rootpath)
    return CiPytestPlugin(config, suites, state)
