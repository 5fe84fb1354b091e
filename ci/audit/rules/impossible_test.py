"""impossible-test: every registered test can run on some hardware it is registered for, and skips only
for registered reasons (own audit only).

``own(report)``: each enabled registration's skip uses (``ci.audit.skips``, read from syntax trees)
against the skip table and the hardware catalog; it also fills the debt table's conditional skips.
"""
from __future__ import annotations

from ci.audit.findings import Rule
from ci.audit.skips import condition_skips

RULE = Rule(
    "impossible-test",
    "every registered test can run on some hardware it is registered for, "
    "and skips only for registered reasons",
    "a test registered for cpu that skips below 2 GPUs: green forever, never run",
    "@register(hardware='cpu') with registered_skip('needs_2_gpus')",
    "error   [impossible-test] ...: is registered only for ['cpu'], where ... always skips it",
)


def own(report) -> None:
    """``report``: ``ci.audit.own.AuditReport`` (``skip_table``, ``skip_uses``; fills ``debt_rows``)."""
    catalog, table, uses = report.registry.catalog, report.skip_table, report.skip_uses
    seen_debt: set[tuple[str, str]] = set()
    for reg in report.registry.collection.registrations:
        if reg.disabled is not None:
            continue
        node_uses = uses.get(reg.node_id, [])
        for use in node_uses:
            if use.unregistered and not use.always:
                whom = f"every test of {use.node_id}" if "::" not in use.node_id else reg.node_id
                message = (f"{use.where}: {use.how} skips {whom} without a registered reason: the runner "
                           "fails the job when it does (use registered_skip(key) / a marker from registered/skips.py)")
                if use.unknown_key is not None:
                    message = (f"{use.where}: {use.how} skips {whom} with skip key {use.unknown_key!r}, which "
                               "registered/skips.py does not declare: add it to SKIP_REASONS in registered/skips.py "
                               "(text and skips_when), or use an existing key")
                report.add(RULE.id, message, suite=reg.node_id)
                continue
            if use.key is None and not use.always:
                continue
            reason = table.reasons.get(use.key) if use.key else None
            if (reg.node_id, use.where) in seen_debt:
                continue
            seen_debt.add((reg.node_id, use.where))
            if use.always:
                report.add(RULE.id,
                    f"{use.where}: {reg.node_id}: {use.how} skips it unconditionally: it never runs "
                    "(register it with disabled={'reason': ..., 'until': ...} instead)", suite=reg.node_id)
                continue
            if reason is None:
                continue
            when = reason.skips_when if reason.skips_when != "gpus<N" else f"gpus<{use.arg}"
            report.debt_rows.append((reg.node_id, f"skip {reason.key}", reason.text, reason.owner or "-",
                                     reason.until or f"when {when}", use.where))
            labels = [catalog.hardware[h] for h in reg.hardware if h in catalog.hardware]
            if labels and all(condition_skips(reason.skips_when, hw.gpus, hw.vendor, use.arg) for hw in labels) \
                    and not reason.unconditional:
                report.add(RULE.id,
                    f"{reg.where}: {reg.node_id} is registered only for {list(reg.hardware)}, where {use.how} "
                    f"({use.where}) always skips it ({reason.key}: skips when {when}): it can never run",
                    suite=reg.node_id)
