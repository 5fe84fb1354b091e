"""Every ``docs/design.md §x`` citation in the repository names a heading of docs/design.md.

Code and docs cite the design by section number; a renumbered or missing heading
would leave citations pointing nowhere. The scan covers the repository's own
Python, Markdown, TOML and YAML files (not hidden folders, caches, or the
foreign-repository fixtures under registered/fixtures/). It also fails on any
remaining mention of the old out-of-tree specification by its file name, which
readers of this repository cannot open. This file needs no torch.
"""
from __future__ import annotations

import re
from pathlib import Path

from ci.registration import register

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT / "docs" / "design.md"
SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml"}
SKIP_DIRS = {"__pycache__", "node_modules", "build", "dist", "ci-results"}
SKIP_PATHS = {Path("registered/fixtures")}

HEADING = re.compile(r"^#{1,6}\s+(\d+(?:\.\d+)*)\.?\s")
SECTION = re.compile(r"§\s*(\d+(?:\.\d+)*)")
# "docs/design.md §3.4-§3.8", "docs/design.md §5, §6": the section list right after the path.
CITATION = re.compile(r"docs/design\.md`?\s*((?:§\s*\d+(?:\.\d+)*(?:\s*(?:[-–,/]|and|or)\s*)?)+)")
# The old specification's name as a word (not inside identifiers such as DSPARK_SPEC_ALGO).
OLD_SPEC = re.compile(r"(?<![A-Za-z0-9_])SPEC(?![A-Za-z0-9_])")


def design_headings(text: str) -> set[str]:
    return {m.group(1) for line in text.splitlines() if (m := HEADING.match(line))}


def dangling_citations(text: str, headings: set[str], *, internal: bool = False) -> list[tuple[int, str]]:
    """(line, section) for each cited section that has no heading. ``internal``: the text is
    docs/design.md itself, where every bare ``§x`` is a citation."""
    found = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if HEADING.match(line):
            continue
        groups = [line] if internal else [m.group(1) for m in CITATION.finditer(line)]
        for group in groups:
            found += [(lineno, s) for s in SECTION.findall(group) if s not in headings]
    return found


def old_spec_mentions(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if OLD_SPEC.search(line)]


def repository_files() -> list[Path]:
    files = []
    for path in sorted(ROOT.rglob("*")):
        rel = path.relative_to(ROOT)
        if path.suffix not in SUFFIXES or not path.is_file():
            continue
        if any(p.startswith(".") or p in SKIP_DIRS or p.endswith(".egg-info") for p in rel.parts[:-1]):
            continue
        if any(rel.is_relative_to(skip) for skip in SKIP_PATHS) or path == Path(__file__).resolve():
            continue
        files.append(path)
    return files


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_every_design_citation_names_a_heading():
    headings = design_headings(DESIGN.read_text(encoding="utf-8"))
    assert {"0", "3.8", "9.13", "10", "11"} <= headings, f"docs/design.md lost core headings: {sorted(headings)}"
    problems, cited = [], 0
    for path in repository_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        internal = path == DESIGN
        cited += sum(len(SECTION.findall(g)) for line in text.splitlines() for g in
                     ([line] if internal else [m.group(1) for m in CITATION.finditer(line)]))
        problems += [f"{path.relative_to(ROOT)}:{n}: §{s}"
                     for n, s in dangling_citations(text, headings, internal=internal)]
    assert cited > 0, "found no citation at all: the scan is not reading the repository"
    assert not problems, "citations of sections that docs/design.md has no heading for:\n" + "\n".join(problems)


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=5)
def test_no_citation_of_the_out_of_tree_specification_remains():
    problems = []
    for path in repository_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += [f"{path.relative_to(ROOT)}:{n}" for n in old_spec_mentions(text)]
    assert not problems, ("cite docs/design.md instead of the old specification:\n" + "\n".join(problems))


@register(suite="ci", hardware="cpu", schedule="per-commit", est_time=1)
def test_the_checks_catch_what_they_claim_to():
    headings = design_headings("# t\n## 3. Ops\n### 3.8 Prefill\n#### 9.4 Trim\ntext §3.8\n")
    assert headings == {"3", "3.8", "9.4"}
    good = "see docs/design.md §3.8 and `docs/design.md` §9.4; ranges docs/design.md §3-§3.8"
    assert dangling_citations(good, headings) == []
    bad = "x\n(docs/design.md §3.4-§3.8, §7) and docs/design.md §12.1\n"
    assert dangling_citations(bad, headings) == [(2, "3.4"), (2, "7"), (2, "12.1")]
    assert dangling_citations("### 3.8 Prefill\nsee §3.9 and §3\n", headings, internal=True) == [(2, "3.9")]
    assert dangling_citations("a §2 that cites nothing in particular", headings) == []
    leftovers = "".join(f"{word}\n" for word in ("ok DSPARK_SPEC_ALGO", "S" + "PEC §3", "S" + "PEC.md",
                                                 "the S" + "PEC's rule", "SPECIAL"))
    assert old_spec_mentions(leftovers) == [2, 3, 4]
