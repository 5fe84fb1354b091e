"""impl.bench.renorm_versions on CPU: the table gives each version's median and range and the ratio,
a case whose versions disagree is named and not timed, and bad arguments are refused before any
import of a GPU path (exit 2, one line)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from ci.registration import register
from impl.bench.renorm_versions import table

ROOT = Path(__file__).resolve().parents[1]


def _row(case, version, times, same=True):
    return dict(case=case, batch=64, version=version, same_output=same, graph_us=times,
                median_us=sorted(times)[len(times) // 2] if times else None)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=1)
def test_the_table_gives_medians_ranges_and_the_ratio():
    rows = [_row("top_k 64", "before", [70.0, 68.0, 69.0]), _row("top_k 64", "after", [50.0, 52.0, 49.0]),
            _row("top_p 64", "before", [], same=False), _row("top_p 64", "after", [], same=False)]
    lines = table(rows).splitlines()
    assert "before / after" in lines[0]
    top_k = next(line for line in lines if line.startswith("top_k 64"))
    assert "69.0 (68.0-70.0)" in top_k and "50.0 (49.0-52.0)" in top_k and "1.38x" in top_k
    top_p = next(line for line in lines if line.startswith("top_p 64"))
    assert "outputs differ: not timed" in top_p and "x" not in top_p.split()[-1]


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=4)
def test_bad_arguments_exit_2_in_one_line(tmp_path):
    for args in (["--before-root", str(tmp_path)], ["--before-root", str(ROOT), "--batches", "1,x"],
                 ["--before-root", str(ROOT), "--rounds", "0"], ["--before-root", str(ROOT), "--family", "gauss"]):
        out = subprocess.run([sys.executable, "-m", "impl.bench.renorm_versions", *args], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
        assert out.returncode == 2, (args, out.stderr)
        assert "Traceback" not in out.stderr and out.stderr.strip().splitlines()[-1].startswith(
            "python -m impl.bench.renorm_versions: error:"), out.stderr


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=10)
def test_two_trees_take_turns_on_their_own_inputs():
    """measure() on CPU with this tree imported again as the 'before': every (case, version) row is
    timed each round, the versions' outputs agree, and each batch's calls get that batch's inputs
    (a call bound to another batch's rows is refused by the op: k's shape)."""
    import impl
    from impl.bench.metadata_cost import import_renamed
    from impl.bench.renorm_versions import measure

    rows = measure({"before": import_renamed(ROOT), "after": impl}, batches=(1, 3), rounds=2, vocab=300,
                   device="cpu", settings=(("top_k", 5), ("top_p", 0.9)))
    assert [(r["batch"], r["case"].split()[0], r["version"]) for r in rows] == [
        (b, op, v) for b in (1, 3) for op in ("top_k", "top_p") for v in ("before", "after")]
    assert all(r["same_output"] and len(r["graph_us"]) == 2 and r["median_us"] > 0 for r in rows)


@register(suite="components", hardware=["cpu"], schedule="per-commit", est_time=5)
def test_a_family_replaces_the_bench_rows_and_names_itself(monkeypatch):
    """--family times one of renorm_inputs' row families: its generator makes each batch's rows (a spy
    in its place is asked for exactly those) and the cases name it."""
    import impl
    import impl.bench.renorm_inputs as inputs
    from impl.bench.metadata_cost import import_renamed
    from impl.bench.renorm_versions import measure

    asked = []
    describe, make = inputs.FAMILIES["uniform"]

    def spy(rows, vocab, gen):
        asked.append((rows, vocab))
        return make(rows, vocab, gen)

    monkeypatch.setitem(inputs.FAMILIES, "uniform", (describe, spy))
    versions = {"before": import_renamed(ROOT), "after": impl}
    rows = measure(versions, batches=(2, 3), rounds=1, vocab=300, device="cpu", settings=(("top_k", 5),),
                   family="uniform")
    assert asked == [(2, 300), (3, 300)]
    assert [r["case"] for r in rows] == ["top_k 2x300 uniform k=5"] * 2 + ["top_k 3x300 uniform k=5"] * 2
    assert all(r["same_output"] and r["median_us"] > 0 for r in rows)
