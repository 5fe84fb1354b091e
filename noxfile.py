"""dspark-suite sessions. ``nox -s pr`` is everything a pull request must pass.

    nox -s pr                                   lint + audit + workflow checks + every per-commit cpu job
    nox -s suite -- --group G --shard I/N       what one generated GitHub job runs (or --job ID [--shard I/N])
    nox -s kernels                              op report + per-commit kernel jobs for this machine
    nox -s lint [-- --fix]                      ruff (rules in pyproject.toml)
    nox -s audit                                registry audit table and rules
    nox -s workflows [-- --check]               (re)generate .github/workflows/ or check drift, schema, linters
    nox -s nightly_mi35x [-- --emulate]         the MI35x nightly jobs (refused elsewhere unless --emulate)
    nox -s coverage_gap -- --base REV [--report-only]
    nox -s liveness [-- --repo O/N]             every registered job ran lately (GitHub API; needs GITHUB_TOKEN)
    nox -s liveness -- --self-check             liveness.yml itself is scheduled and ran lately (per-commit lint)
    nox -s durations -- --from DIR              refresh ci/durations.json from the JUnit files of a run
    nox -s timing [-- --no-write]               per-commit cpu jobs: start / collection / test time per job; durations
    nox -s bench [-- ARGS]                      python -m impl.bench ARGS

Environments. Two environments under ``.nox/`` are shared by every session: ``shared-torch``
(torch, triton, the project with its test extras; ``bench`` adds matplotlib to it) and
``shared-tools`` (pyyaml, check-jsonschema, ruff, actionlint, zizmor: no torch). Each is
installed once and reinstalled only when its key changes (pins, the requirements in
pyproject.toml, system site-packages), so ``nox -s kernels`` then ``nox -s pr`` installs torch once.
The interpreter running nox is not in the key: the env runs its own ``bin/python``, so nox
started from another interpreter (pipx, a different venv) reuses it as it is; an env whose
``bin/python`` no longer runs counts as changed. Reuse flags never delete: with ``-r`` /
``--reuse-existing-virtualenvs`` a missing env is created and missing extras are added, and
with ``-R`` / ``--no-install`` nothing is installed at all; an env that would need a rebuild
(or, under ``--no-install``, any install) is refused with one line on stderr and exit 2. On a machine without a GPU
torch is ``torch==2.13.0`` (the CPU build on disk here); CI passes the catalog's pins
(``CI_TORCH_VERSION``, ``CI_TRITON_VERSION``, ``CI_TORCH_INDEX_URL``, from
``ci/hardware.yaml``). On an NVIDIA machine the env sees the system site-packages and pip
installs the pinned torch only when the system one differs; under ROCm the image's torch
and triton are kept (no dependency resolution for them).

Two nox runs in one checkout. An env is checked under a shared lock (``.nox/shared-<name>.lock``)
and created or refreshed under an exclusive one, then used under the shared lock until nox ends:
a second nox waits (one line on stderr, at most ``DSPARK_ENV_LOCK_WAIT_S`` seconds, default 1800)
instead of deleting an env another is installing or using, then reuses it; past the wait it refuses
with one line, exit 2. SIGTERM to nox reaches the command it runs as nox's own interrupt does
(SIGTERM to the command, which gets ``RUNNER_STOP_S`` to stop before SIGKILL), and nox exits 143;
Ctrl-C gives the command the same time (the runner stops pytest and writes its summaries,
docs/design.md §8.6), and nox exits 130.

Arguments after ``--``. With one session named, it gets them all. With several named
(``nox -s audit workflows -- --check``), each session takes the options it declares in
``OPTIONS`` below; the rest go to the named session that declares no option list (suite,
kernels, coverage_gap, durations, bench); an argument no named session takes is an error.
Refusals (bad arguments, no MI35x without --emulate, no GITHUB_TOKEN) happen before any install.
"""
from __future__ import annotations

import contextlib
import fcntl   # stdlib (POSIX): the interpreter running nox need not have the filelock package
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import nox

nox.options.default_venv_backend = "none"
nox.options.sessions = ["pr"]

ROOT = Path(__file__).resolve().parent
NVIDIA = shutil.which("nvidia-smi") is not None
ROCM = shutil.which("rocm-smi") is not None or os.path.exists("/dev/kfd")
GPU_MACHINE = NVIDIA or ROCM
LOCAL_CPU_TORCH = "2.13.0"   # = ci/hardware.yaml cpu toolchain; on disk on the CI machines

# session -> {option: takes a value}; None = free-form (its program validates the arguments)
OPTIONS: dict[str, dict[str, bool] | None] = {
    "pr": {"--root": True, "--hardware": True, "--as-shards": False, "--jobs": True},
    "lint": {"--fix": False},
    "audit": {"--root": True, "--today": True, "--format": True, "--adapter": True, "--repo": True,
              "--repository": True, "--output": True, "--baseline": True, "--write-baseline": True,
              "--strict-baseline": False, "--show-baselined": False, "--fail-on": True,
              "--pytest-collection": False, "--debug": False},   # = dspark-audit's options (a test compares them)
    "workflows": {"--check": False, "--no-linters": False, "--root": True},
    "nightly_mi35x": {"--emulate": False, "--job": True},
    "liveness": {"--repo": True, "--today": True, "--root": True, "--now": True, "--self-check": False,
                 "--days": True, "--max-queued-hours": True, "--deadline": True, "--debug": False},
    "suite": None, "kernels": None, "coverage_gap": None, "durations": None, "bench": None,
    "timing": {"--hardware": True, "--schedule": True, "--suite-prefix": True, "--as-shards": False,
               "--no-write": False},
}


# ---------------------------------------------------------------- arguments

def _named_sessions(session: nox.Session) -> list[str]:
    """Sessions named on the command line (nox keeps them in its global config)."""
    try:
        named = session._runner.global_config.sessions   # noqa: SLF001 - nox has no public accessor
    except AttributeError:
        named = None
    names = [n.split("(")[0] for n in (named or []) if n.split("(")[0] in OPTIONS]
    return names or [session.name]


def _tokens(args: list[str], takes_value: Callable[[str], bool]) -> list[list[str]]:
    """Split posargs into option groups: ['--flag'], ['--key', 'value'], ['--key=value'], ['positional']."""
    out: list[list[str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            out.append(args[i:])
            break
        if arg.startswith("--") and "=" not in arg and takes_value(arg) and i + 1 < len(args):
            out.append([arg, args[i + 1]])
            i += 2
            continue
        out.append([arg])
        i += 1
    return out


def session_args(session: nox.Session) -> list[str]:
    """This session's share of the posargs (see the module docstring); errors before any install."""
    mine = OPTIONS[session.name]
    named = _named_sessions(session)
    posargs = list(session.posargs)
    if len(named) <= 1 or session.name not in named:
        if mine is not None:
            tokens = _tokens(posargs, lambda a: mine.get(a, False))
            unknown = [t[0] for t in tokens if t[0].split("=")[0] not in mine]
            if unknown:
                session.error(f"nox -s {session.name}: unknown argument(s) {unknown}; accepted: {sorted(mine)}")
        return posargs
    declared = {n: OPTIONS[n] for n in named if OPTIONS[n] is not None}
    free = [n for n in named if OPTIONS[n] is None]
    tokens = _tokens(posargs, lambda a: any(opts.get(a, False) for opts in declared.values()))
    out: list[str] = []
    for token in tokens:
        flag = token[0].split("=")[0]
        owners = [n for n, opts in declared.items() if flag in opts]
        if not owners and not free:
            session.error(f"argument {token[0]!r} is accepted by none of the sessions {named}")
        if session.name in owners or (not owners and session.name == (free[0] if free else None)):
            out.extend(token)
    return out


# ---------------------------------------------------------------- shared environments

def _pyproject() -> dict:
    return nox.project.load_toml(ROOT / "pyproject.toml")


def _group(*names: str) -> list[str]:
    return list(nox.project.dependency_groups(_pyproject(), *names))


def _extras(*names: str) -> list[str]:
    optional = _pyproject()["project"].get("optional-dependencies", {})
    return [req for name in names for req in optional.get(name, [])]


def _requirements_hash() -> str:
    """What an environment's contents depend on in pyproject.toml (not tool settings such as ruff's)."""
    data = _pyproject()
    relevant = {"project": {k: data["project"].get(k) for k in ("dependencies", "optional-dependencies")},
                "dependency-groups": data.get("dependency-groups")}
    return hashlib.sha256(json.dumps(relevant, sort_keys=True).encode()).hexdigest()


def _pins() -> dict[str, str]:
    """torch/triton pins: CI passes the catalog's through the environment; locally the CPU default."""
    pins = {k: os.environ[k] for k in ("CI_TORCH_VERSION", "CI_TRITON_VERSION", "CI_TORCH_INDEX_URL")
            if os.environ.get(k)}
    if not GPU_MACHINE:
        pins.setdefault("CI_TORCH_VERSION", LOCAL_CPU_TORCH)
    return pins


def _reuse_flag(session: nox.Session) -> tuple[str | None, bool]:
    """(the reuse flag given, whether it forbids installing): ``-R``/``--no-install`` forbid any
    install; ``-r``/``--reuse-existing-virtualenvs`` (``--reuse-venv=yes|always``) only deleting."""
    config = getattr(getattr(session, "_runner", None), "global_config", None)   # noqa: SLF001 - no public accessor
    if getattr(config, "no_install", False):
        return "-R/--no-install", True
    if getattr(config, "reuse_venv", "no") in ("yes", "always"):
        return "-r/--reuse-existing-virtualenvs", False
    return None, False


def _refuse(message: str) -> None:
    """One line on stderr, exit 2 (nox lets SystemExit through)."""
    print(f"nox: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


ENV_LOCK_WAIT_S = 1800.0   # how long a second nox waits for an env another nox installs or uses
_ENV_LOCKS: dict[Path, int] = {}   # env -> the fd of its lock file, held until this nox exits


def _lock_env(env: Path, mode: int) -> None:
    """Hold ``mode`` (fcntl.LOCK_SH to use, LOCK_EX to create/refresh) on ``env``'s lock file; another nox
    holding it makes this one wait (one line), then refuse with one line and exit 2 past the wait."""
    fd = _ENV_LOCKS.get(env)
    if fd is None:
        env.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(f"{env}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        _ENV_LOCKS[env] = fd
    if mode == fcntl.LOCK_EX:   # shared -> exclusive is not atomic in flock(2): drop ours, then wait
        fcntl.flock(fd, fcntl.LOCK_UN)
    # (shared while holding our own exclusive lock is a downgrade: it never waits)
    where = env.relative_to(ROOT)
    try:
        wait_s = float(os.environ.get("DSPARK_ENV_LOCK_WAIT_S", ENV_LOCK_WAIT_S))
    except ValueError:
        _refuse(f"DSPARK_ENV_LOCK_WAIT_S: expected seconds (a number), got {os.environ['DSPARK_ENV_LOCK_WAIT_S']!r}")
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        try:
            fcntl.flock(fd, mode | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        if time.monotonic() >= deadline:
            _refuse(f"{where}: another nox still {'installs' if mode == fcntl.LOCK_SH else 'installs or uses'} "
                    f"it after {wait_s:.0f} s (DSPARK_ENV_LOCK_WAIT_S); run again when it has finished")
        if not said:
            print(f"nox: {where}: another nox is {'installing' if mode == fcntl.LOCK_SH else 'installing or using'} "
                  f"it; waiting up to {wait_s:.0f} s", file=sys.stderr, flush=True)
            said = True
        time.sleep(0.2)


def _current(env: Path, key: dict, extras: tuple[str, ...]) -> bool:
    """Whether the env is complete for ``key`` and ``extras`` (read under the shared lock: nothing to do)."""
    stamp = env / "dspark-env.json"
    try:
        state = json.loads(stamp.read_text()) if stamp.is_file() else {}
    except (OSError, ValueError):
        return False
    old = {k: v for k, v in state.get("key", {}).items() if k != "python"}
    have = state.get("extras", [])
    return old == key and bool(have) and all(e in have for e in extras) and _runs(env / "bin" / "python")


def _runs(python: Path) -> bool:
    try:
        return subprocess.run([str(python), "-c", ""], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


def _ensure(session: nox.Session, name: str, key: dict, extras: tuple[str, ...],
            install: Callable[[Callable[..., None], tuple[str, ...]], None], *, system_site: bool = False) -> Path:
    """Create/refresh ``.nox/shared-<name>``: reinstall when ``key`` changed, add missing ``extras``.
    Under a reuse flag it never deletes (and under --no-install never installs): it refuses instead.
    Locked against another nox (module docstring): returns holding the shared lock until nox exits."""
    env = ROOT / ".nox" / f"shared-{name}"
    key = {**key, "system_site": system_site, "requirements": _requirements_hash()}
    _lock_env(env, fcntl.LOCK_SH)
    if _current(env, key, extras):
        session.log(f"{env.relative_to(ROOT)}: up to date ({', '.join(extras)}); nothing installed")
        return env
    _lock_env(env, fcntl.LOCK_EX)   # look again: the nox we waited for may have just built it
    _ensure_locked(session, env, key, extras, install, system_site=system_site)
    _lock_env(env, fcntl.LOCK_SH)   # (after a refusal or a failed install the exclusive lock ends with nox)
    return env


def _ensure_locked(session: nox.Session, env: Path, key: dict, extras: tuple[str, ...],
                   install: Callable[[Callable[..., None], tuple[str, ...]], None], *, system_site: bool) -> Path:
    """``_ensure``'s work under the exclusive lock."""
    python = env / "bin" / "python"
    stamp = env / "dspark-env.json"
    state = json.loads(stamp.read_text()) if stamp.is_file() else {}
    if "key" in state:   # stamps written before the interpreter running nox left the key
        state["key"] = {k: v for k, v in state["key"].items() if k != "python"}
    flag, no_install = _reuse_flag(session)
    where = env.relative_to(ROOT)
    if state.get("key") != key or not _runs(python):
        old = state.get("key")
        changed = sorted(k for k in set(key) | set(old or {}) if key.get(k) != (old or {}).get(k))
        why = ("its install never finished (no dspark-env.json)" if old is None
               else f"its key changed ({', '.join(changed)})" if changed else "its bin/python does not run")
        if env.exists() and flag:
            _refuse(f"{where}: {why}; {flag} never deletes an environment: run without it to rebuild")
        if no_install:
            _refuse(f"{where}: does not exist; {flag} never installs: run without it once to create it")
        if env.exists():
            session.log(f"{where}: {why}, rebuilding")
            shutil.rmtree(env)
        session.run_install(sys.executable, "-m", "venv", *(["--system-site-packages"] if system_site else []),
                            str(env), external=True)
        state = {"key": key, "extras": []}
    missing = tuple(e for e in extras if e not in state["extras"])
    if not missing and state["extras"]:
        session.log(f"{env.relative_to(ROOT)}: up to date ({', '.join(state['extras'])}); nothing installed")
        return env
    if no_install:
        _refuse(f"{where}: lacks the extras {list(missing or extras)} this session needs; {flag} never installs: "
                "run without it to add them")

    def pip(*args: str) -> None:
        session.run_install(str(python), "-m", "pip", "install", "--disable-pip-version-check", *args, external=True)

    stamp.unlink(missing_ok=True)
    install(pip, missing or extras)
    state["extras"] = sorted(set(state["extras"]) | set(extras))
    stamp.write_text(json.dumps(state, sort_keys=True))
    return env


def torch_env(session: nox.Session, *extras: str) -> Path:
    extras = ("test", *extras)
    pins = _pins()

    def install(pip: Callable[..., None], todo: tuple[str, ...]) -> None:
        if "test" in todo:
            if ROCM:    # keep ROCm's torch and triton (pytorch-triton-rocm): no resolution for them
                pip("-e", ".", "--no-deps")
                base = [r for r in [*_pyproject()["project"]["dependencies"], *_extras("kernels")]
                        if not r.startswith(("torch", "triton"))]
                pip(*base, *_extras("test"))
            else:
                index = ["--index-url", pins["CI_TORCH_INDEX_URL"]] if "CI_TORCH_INDEX_URL" in pins else []
                if "CI_TORCH_VERSION" in pins:
                    pip(*index, f"torch=={pins['CI_TORCH_VERSION']}")
                if "CI_TRITON_VERSION" in pins:
                    pip(f"triton=={pins['CI_TRITON_VERSION']}")
                pip("-e", ".[kernels,test]")
            _put_checkout_on_path(session, ROOT / ".nox" / "shared-torch" / "bin" / "python")
        rest = [e for e in todo if e != "test"]
        if rest:
            pip(*_extras(*rest))

    return _ensure(session, "torch", torch_env_key(), extras, install, system_site=GPU_MACHINE)


def torch_env_key() -> dict:
    """What the torch environment's contents depend on here, besides pyproject.toml's requirements
    and system site-packages (``_ensure`` adds those): the pins, ROCm, the checkout on its path."""
    return {"pins": _pins(), "rocm": ROCM, "checkout_on_path": True}


def _put_checkout_on_path(session: nox.Session, python: Path) -> None:
    """The editable install exposes the project as ``dspark_suite.*`` (its installed name, as in the
    wheel); the repository's own code and tests import ``ci``, ``impl``, ``reference`` and
    ``registered`` from the checkout, from any folder (the runner's fixture repositories). A ``.pth``
    file puts the checkout on this development environment's path; a wheel never does that."""
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "dspark_suite_checkout.pth").write_text(f"{ROOT}\n", encoding="utf-8")
    session.log(f"{Path(purelib).name}/dspark_suite_checkout.pth -> {ROOT}")


def tools_env(session: nox.Session) -> Path:
    def install(pip: Callable[..., None], todo: tuple[str, ...]) -> None:
        pip(*_group(*todo))

    return _ensure(session, "tools", {}, ("lint", "workflows"), install)


# a command's time to stop after SIGTERM: ci.runner.run_suite's --kill-grace (20 s) + its summaries
RUNNER_STOP_S = 60.0


class _Terminated(KeyboardInterrupt):
    """SIGTERM to nox, raised where nox waits for its command, so that nox's interrupt path forwards it."""


def _on_sigterm(_signum, _frame) -> None:
    raise _Terminated


@contextlib.contextmanager
def _sigterm_forwarded():
    """SIGTERM to nox inside the block: nox's interrupt path stops the command, then nox exits 143 with one
    line. Never a success: the exit code only says which signal it was (Ctrl-C stays nox's 130)."""
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    except _Terminated:
        print(f"nox: SIGTERM: the command was stopped (it had {RUNNER_STOP_S:.0f} s to stop); exit 143",
              file=sys.stderr, flush=True)
        raise SystemExit(143) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_in(session: nox.Session, envs: list[Path], *cmd: str) -> None:
    """``python CMD`` with the first env's interpreter and every env's bin/ on PATH. SIGTERM to nox and
    Ctrl-C reach the command (SIGTERM), which gets RUNNER_STOP_S before SIGKILL (module docstring)."""
    path = os.pathsep.join([str(e / "bin") for e in envs] + [os.environ.get("PATH", "")])
    with _sigterm_forwarded():
        session.run(str(envs[0] / "bin" / "python"), *cmd, external=True,
                    env={"PATH": path, "VIRTUAL_ENV": str(envs[0])},
                    interrupt_timeout=0, terminate_timeout=RUNNER_STOP_S)


# ---------------------------------------------------------------- sessions

@nox.session
def suite(session: nox.Session) -> None:
    """Run one group shard (--group G --shard I/N) or one registry job (--job ID [--shard I/N])."""
    args = session_args(session)
    run_in(session, [torch_env(session)], "-m", "ci.runner.run_suite", *args)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff over the repository (rules in pyproject.toml); -- --fix applies the safe fixes."""
    args = session_args(session)
    run_in(session, [tools_env(session)], "-m", "ruff", "check", *args, ".")


AUDIT_DEFAULTS = ("--adapter", "dspark")   # the own registry; a later --adapter in the arguments wins


@nox.session
def audit(session: nox.Session) -> None:
    """Registry audit: dspark-audit itself (ci/audit/cli.py), on this project's registry unless told otherwise."""
    args = session_args(session)
    run_in(session, [tools_env(session)], "-m", "ci.audit.cli", *AUDIT_DEFAULTS, *args)


@nox.session
def workflows(session: nox.Session) -> None:
    """Write .github/workflows/; -- --check: drift, schema, actionlint, zizmor, toolchain pins."""
    args = session_args(session)
    run_in(session, [tools_env(session)], "-m", "ci.github.generate", *args)


@nox.session
def pr(session: nox.Session) -> None:
    """Every per-commit check: ruff, audit, workflow checks, every per-commit cpu job."""
    args = session_args(session)
    tools = tools_env(session)
    run_in(session, [tools], "-m", "ci.runner.pr", "--check-arguments", *args)   # a usage error before any check
    env = torch_env(session)
    run_in(session, [tools], "-m", "ruff", "check", ".")
    run_in(session, [env, tools], "-m", "ci.runner.pr", *args)


OP_REPORT = "impl.testing.op_report"


@nox.session
def kernels(session: nox.Session) -> None:
    """Op report, then the per-commit kernel jobs for this machine (cpu / h200-1 / mi35x-1)."""
    args = session_args(session)
    env = torch_env(session)
    run_in(session, [env], "-m", OP_REPORT)
    run_in(session, [env], "-m", "ci.runner.run_many", "--schedule", "per-commit", "--hardware", "auto-kernels",
           "--suite-prefix", "kernels", *args)


@nox.session
def nightly_mi35x(session: nox.Session) -> None:
    """The nightly MI35x jobs. Refused (before installing) off ROCm, unless -- --emulate."""
    args = session_args(session)
    emulate = "--emulate" in args
    if not ROCM and not emulate:
        session.error("nightly_mi35x: this machine has no ROCm device (/dev/kfd, rocm-smi); "
                      "run it on an MI35x, or pass -- --emulate to emulate HIP here")
    cmd = ["--schedule", "nightly", "--hardware-prefix", "mi35x", "--require-mi35x"]
    if "--job" in args:  # one nightly job: -- --job nightly/mi35x-8/dspark-e2e[kv]
        cmd += ["--job", args[args.index("--job") + 1]]
    run_in(session, [torch_env(session)], "-m", "ci.runner.run_many", *cmd, *(["--emulate"] if emulate else []))


@nox.session
def coverage_gap(session: nox.Session) -> None:
    """Changed impl/ lines no per-commit cpu job executes: -- --base REV [--report-only]."""
    args = session_args(session)
    run_in(session, [torch_env(session)], "-m", "ci.tools.coverage_gap", *args)


@nox.session
def liveness(session: nox.Session) -> None:
    """Fail when a registered job has not run lately (GitHub Actions history; GITHUB_TOKEN)."""
    args = session_args(session)
    if not os.environ.get("GITHUB_TOKEN"):
        session.error("liveness: GITHUB_TOKEN is not set (a token that may read this repository's Actions history)")
    run_in(session, [tools_env(session)], "-m", "ci.tools.liveness", *args)


@nox.session
def durations(session: nox.Session) -> None:
    """Refresh ci/durations.json from the JUnit files of a run: -- --from DIR (downloaded ci-results-*)."""
    args = session_args(session)
    if not args:
        session.error("durations: pass -- --from DIR, a folder holding a run's downloaded ci-results-* artifacts")
    run_in(session, [tools_env(session)], "-m", "ci.registry.durations", *args)


@nox.session
def timing(session: nox.Session) -> None:
    """Per job: process start, collection and test time; then refresh ci/durations.json from the run."""
    args = session_args(session)
    run_in(session, [torch_env(session)], "-m", "ci.runner.timing", *args)


@nox.session
def bench(session: nox.Session) -> None:
    """Benchmarks: python -m impl.bench ARGS."""
    args = session_args(session)
    run_in(session, [torch_env(session, "bench")], "-m", "impl.bench", *args)


if __name__ == "__main__":
    sys.exit("run with nox: nox -s pr (see nox -l)")
