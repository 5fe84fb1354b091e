"""The house a newcomer walks into: a README that fits in five minutes with fences that close and
links that lead somewhere, docs whose links resolve, and tracked files that speak of the project
only (no machine or scratch paths, no words about who did what)."""
from __future__ import annotations

import re
import subprocess

import pytest

from ci.registration import register
from registered.fixture_repo import REAL_ROOT

LINK = re.compile(r"(?<!!)\[[^\]]+\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _outside_fences(text: str) -> list[str]:
    lines, inside = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if not inside:
            lines.append(line)
    return lines


def _problems(path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    problems = []
    fences = [line for line in text.splitlines() if line.lstrip().startswith("```")]
    if len(fences) % 2:
        problems.append(f"{path.name}: {len(fences)} code fence lines: one is never closed")
    prose = "\n".join(_outside_fences(text))
    for target in LINK.findall(prose):
        if re.match(r"^[a-z]+:", target):
            continue   # https:, mailto: -- outside the repository
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        if not linked.exists():
            problems.append(f"{path.name}: link {target!r}: {file_part} does not exist")
            continue
        if anchor and linked.suffix == ".md":
            headings = {_anchor(h.lstrip("#")) for h in _outside_fences(linked.read_text(encoding="utf-8"))
                        if h.startswith("#")}
            if anchor not in headings:
                problems.append(f"{path.name}: link {target!r}: no heading #{anchor} in {linked.name}")
    return problems


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_readme_is_short_its_fences_close_and_its_links_resolve():
    readme = REAL_ROOT / "README.md"
    assert len(readme.read_text(encoding="utf-8").splitlines()) <= 200
    assert _problems(readme) == []
    text = readme.read_text(encoding="utf-8")
    assert "nox -s kernels" in text.split("\n## ", 1)[0] and "nox -s pr" in text.split("\n## ", 1)[0]


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_every_doc_link_resolves():
    docs = sorted((REAL_ROOT / "docs").glob("*.md")) + [REAL_ROOT / p for p in ("SECURITY.md",)
                                                       if (REAL_ROOT / p).exists()]
    assert len(docs) >= 6
    problems = [p for doc in docs for p in _problems(doc)]
    assert problems == []


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_link_checker_catches_a_dead_link_and_an_open_fence(tmp_path):
    (tmp_path / "there.md").write_text("# Real heading\n")
    doc = tmp_path / "doc.md"
    doc.write_text("[a](there.md#real-heading) [b](missing.md) [c](there.md#nope) [d](#here)\n## Here\n```\nopen\n")
    found = _problems(doc)
    assert any("missing.md does not exist" in p for p in found)
    assert any("no heading #nope" in p for p in found)
    assert any("never closed" in p for p in found)
    assert not any("#real-heading" in p or "#here" in p for p in found)


# Paths of one machine, scratch folders, and words about who did the work, not what it does.
# (Written in pieces so that this file does not match the patterns it looks for.)
_PATHS = ["/" + "work/[a-z]", "/" + "scratch/", "/" + "root/", "/" + "home/[a-z]", "/" + "opt/wheels",
          "/" + "tmp/pytest-of"]
_WORDS = [r"\bhel" + r"per-\d", r"\bsub" + r"agents?\b", r"\bthe le" + r"ad\b", r"\ble" + r"ad's\b",
          r"\bsess" + r"ion \d+\b", r"\bs\d+(fin" + r"al|ho" + r"st)\b"]
FORBIDDEN = re.compile("|".join(_PATHS + _WORDS), re.IGNORECASE)


def _tracked() -> list[str]:
    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=REAL_ROOT, capture_output=True, check=True,
                                timeout=60).stdout.decode().split("\0")
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("git ls-files failed: this test reads the tracked files of a git checkout")
    return [name for name in listed if name]


# Downloaded packages and archives are build inputs, fetched by the install path, never tracked;
# the largest tracked files (plots, the SARIF schema, liveness fixtures) are well under 1 MiB.
PACKAGE_SUFFIXES = (".whl", ".tar.gz", ".tgz", ".zip", ".egg", ".so", ".pt", ".bin")
MAX_TRACKED_BYTES = 1 << 20


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_tracked_files_hold_no_packages_archives_or_large_blobs():
    found = []
    for name in _tracked():
        path = REAL_ROOT / name
        if name.endswith(PACKAGE_SUFFIXES):
            found.append(f"{name}: a package or archive")
        elif path.is_file() and path.stat().st_size > MAX_TRACKED_BYTES:
            found.append(f"{name}: {path.stat().st_size} bytes, over {MAX_TRACKED_BYTES}")
    assert found == [], "\n".join(found)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=2)
def test_tracked_files_hold_no_machine_paths_or_role_words():
    hits = []
    for name in _tracked():
        path = REAL_ROOT / name
        if not path.is_file() or path.suffix == ".png":
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if FORBIDDEN.search(line):
                hits.append(f"{name}:{number}: {line.strip()[:100]}")
    assert hits == [], "\n".join(hits[:40])
