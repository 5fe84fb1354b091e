"""Renorm tunings that steer top_k_renorm / top_p_renorm down each of their paths on small inputs.

The op table's renorm ``variants``; the property tests draw from the same tunings. A
tuning is an explicit ``RenormTuning`` passed as ``tuning=``; nothing here sets module
globals. Imports impl.kernels.renorm only.
"""
from __future__ import annotations

from impl.kernels.renorm import RenormTuning

SMALL_BATCH = 10**9  # finish_min_rows no test batch reaches: the small-batch path


def renorm_tunings() -> dict[str, RenormTuning]:
    """By path: small batches (passes, then a sorted gather, or range passes when 4 sort slots are too few),
    or compaction + finish (roomy scratch: the finish sorts the candidates at once, or after range passes
    when it may sort only 2; 4 slots: rows narrowed by the last compaction, or finishing from their full
    row; one-warp compaction programs; the segment maxima at any batch; the loads a step ahead; top-p's
    probe in place of the first pass)."""
    return {
        "small-batch": RenormTuning(finish_min_rows=SMALL_BATCH),
        "small-batch, 4 sort slots": RenormTuning(finish_min_rows=SMALL_BATCH, sort_capacity=4),
        "finish": RenormTuning(finish_min_rows=1),
        "finish, 2-key sort": RenormTuning(finish_min_rows=1, finish_sort=(2, 2)),
        # 4 slots: rows that do not fit are narrowed by the last compaction and copied by the finish, or (ties
        # wider than the scratch) finish from their full row
        "finish, 4-slot scratch": RenormTuning(finish_min_rows=1, candidate_capacity=4),
        # the segment maxima at every batch (the defaults use them for top-k from 32 rows): both ops read
        # only the segments at or above the compaction's and the write's thresholds
        "finish, segment maxima": RenormTuning(finish_min_rows=1, segment_maxima=True, segment_maxima_rows=1),
        # the loads a step ahead in the first pass, the compaction and the finish, both ops, without the
        # map and with it (the compaction's two prefetching paths: every block, or the listed segments)
        "finish, prefetch": RenormTuning(finish_min_rows=1, prefetch_first_pass=True, prefetch_compact=True,
                                         prefetch_finish=True),
        # one-warp compaction programs, as top-p's from 128 rows (its exact masses summed a step at a time in the
        # reduction that counts the step's candidates), with 8 slots: rows that do not fit split in the first
        # attempt and fit the second, or are narrowed by it; the first pass adds its counts in one reduction
        "finish, one-warp compaction": RenormTuning(finish_min_rows=1, compact=((256, 1), (256, 1)),
                                                    candidate_capacity=8, first_pass_one_reduction=True),
        "finish, segment maxima, prefetch": RenormTuning(finish_min_rows=1, segment_maxima=True, segment_maxima_rows=1,
                                                         prefetch_first_pass=True, prefetch_compact=True,
                                                         prefetch_finish=True),
        # top-p's probe in place of the first pass at every batch (top-k takes its finish path): a budget of 16
        # estimated candidates, so the mass rule picks most starts on small rows, and rows with more keys than that
        # past the guessed end of the pivot end their range there (probe_trim); with 1024 slots a row's chunk rows
        # hold a few hundred keys, so flat rows overflow them and fall back, and the range runs to the row's end
        "finish, probe": RenormTuning(finish_min_rows=1, large_batch_rows=(64, 1), probe_range=(False, True),
                                      one_attempt_rows=1 << 30, probe_budget=16),
        "finish, probe, 1024-slot scratch, untrimmed": RenormTuning(finish_min_rows=1, large_batch_rows=(64, 1),
                                                                    probe_range=(False, True), probe_budget=16,
                                                                    one_attempt_rows=1 << 30, candidate_capacity=1024,
                                                                    probe_trim=False),
    }


def _variants_but(default_path: str) -> dict[str, dict[str, RenormTuning]]:
    return {name: {"tuning": tuning} for name, tuning in renorm_tunings().items() if name != default_path}


def top_k_variants() -> dict[str, dict[str, RenormTuning]]:
    """top_k_renorm's op-table variants: every tuning but "finish", the path the default tuning
    takes at every batch (finish_min_rows 1 for top-k)."""
    return _variants_but("finish")


def top_p_variants() -> dict[str, dict[str, RenormTuning]]:
    """top_p_renorm's op-table variants: every tuning but "small-batch", the path its small samples
    (< 32 rows) already take with the default tuning."""
    return _variants_but("small-batch")
