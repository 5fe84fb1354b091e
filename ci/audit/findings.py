"""What an audit finds: the finding, the rule it names, and the registry type the rules fill.

Both audits (this project's own, ``ci.audit.own``, and another repository's through an adapter,
``ci.audit.foreign``) report a list of :class:`Finding`. Each finding names a :class:`Rule` by
its id (``dormant-suite``, ``masked-step``, ...); the same idea has the same id everywhere.
Output formats (text, json, sarif) and baselines read only these two types. The registry of the
rules is ``ci.audit.rules.REGISTRY``, built from the list of rule modules; this module imports no rule
(every rule module imports it).

    severity  meaning                                                     exit code
    error     proven: e.g. no triggered path can run the suite            1
    warning   depends on run-time values (a gate, a computed matrix), or  0 (1 with --fail-on warning)
              runs only by workflow_dispatch; ``why_unproven`` says which
    note      wasteful or odd (a 4-GPU suite on an 8-GPU runner)          0
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning", "note"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "note")

# The one vocabulary of a registered suite's run state, best first (``Finding.state``, baselines):
#   run          a triggered, unmasked step runs all of it on its schedule (per-commit: pull_request/push;
#                nightly: a schedule); no finding, but a baseline records it (so losing it is a regression)
#   unproven     a step may run it, on a run-time value (an if:, a computed matrix, an unresolved step, a mask
#                on a run-time value)
#   manual-only  only workflow_dispatch runs it
#   partial      triggered steps run some of its partitions (shards), never all
#   dormant      no triggered, unmasked step runs it (a masked run is no run)
# A finding that is not about a suite's run state has state "".
STATES: tuple[str, ...] = ("run", "unproven", "manual-only", "partial", "dormant")
SuiteKey = tuple[str, str, str]     # (hardware, suite, schedule)


def severity_rank(severity: str) -> int:
    """note 1 < warning 2 < error 3 (0: unknown)."""
    return len(SEVERITIES) - SEVERITIES.index(severity) if severity in SEVERITIES else 0


def state_rank(state: str) -> int:
    """"" and run 0 < unproven 1 < manual-only 2 < partial 3 < dormant 4."""
    return STATES.index(state) if state in STATES else 0


@dataclass(frozen=True)
class Location:
    """A place in the audited repository: a repo-relative POSIX path and a 1-based line (0: unknown)."""
    path: str
    line: int = 0


@dataclass(frozen=True)
class Rule:
    """One audit rule. ``id`` is stable (baselines and SARIF fingerprints key on it)."""
    id: str
    title: str            # one line, imperative: what must hold
    prevents: str         # the incident it exists for
    example: str          # a minimal input that breaks it
    output: str           # what the finding prints for that example
    default_severity: Severity = "error"


@dataclass(frozen=True)
class Finding:
    rule: str                           # a Rule.id
    severity: Severity
    message: str
    hardware: str = ""                  # "" when the rule is not about one suite
    suite: str = ""
    schedule: str = ""
    locations: tuple[Location, ...] = ()
    why_unproven: str | None = None     # required for warnings: which run-time value the verdict hangs on
    state: str = ""                     # a suite's run state (STATES) for dormant-suite; "" otherwise

    @property
    def key(self) -> tuple[str, str, str, str]:
        """The baseline key: never a line number, nor a job, step or workflow-file name where a target
        (suite, run target, registered file) identifies the finding, so edits and renames elsewhere do
        not break a baseline. Severity and state are not in it: a baseline compares them."""
        return (self.rule, self.hardware, self.suite, self.schedule)


@dataclass
class RuleRegistry:
    """Rules by id, in registration order. ``register`` refuses a duplicate id; ``of`` builds one from a list."""
    rules: dict[str, Rule] = field(default_factory=dict)

    @classmethod
    def of(cls, rules: "list[Rule] | tuple[Rule, ...]") -> "RuleRegistry":
        registry = cls()
        for rule in rules:
            registry.register(rule)
        return registry

    def register(self, rule: Rule) -> Rule:
        if rule.id in self.rules:
            raise ValueError(f"rule id {rule.id!r} is registered twice")
        self.rules[rule.id] = rule
        return rule

    def __getitem__(self, rule_id: str) -> Rule:
        try:
            return self.rules[rule_id]
        except KeyError:
            raise KeyError(f"unknown audit rule {rule_id!r}; known: {sorted(self.rules)}") from None

    def __iter__(self):
        return iter(self.rules.values())

    def __len__(self) -> int:
        return len(self.rules)
