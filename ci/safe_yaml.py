"""YAML from an audited tree, bounded: aliases cannot expand past a node cap, nesting past a depth cap.

``load_yaml(text)`` is ``yaml.safe_load`` (through libyaml when present; :class:`BoundedLoader`, which
counts merge keys while it expands them) that then counts the document as its readers will walk
it: every alias counts the whole subtree it names, once per use.
Nine aliases of nine aliases of ... (a "billion laughs" under ``matrix:``) load in microseconds
as shared objects, but every reader that walks, multiplies or formats them would spin for minutes;
here they are refused with :class:`YamlTooLarge` (a ``yaml.YAMLError``, so every caller that
already reports invalid YAML reports this too, in one line). A recursive alias (``&a [*a]``)
is refused the same way. The walk is linear in the distinct nodes (a memo by identity).

``short(value)`` is a bounded ``repr`` for messages: a structure from the tree is never formatted
whole. Imports nothing from the project (stdlib and pyyaml only).
"""
from __future__ import annotations

import reprlib
from typing import Any

import yaml

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when present: 10x faster on big trees
MAX_NODES = 250_000    # expanded nodes per document; this project's largest workflow has ~2,000
MAX_DEPTH = 64         # nesting levels; a workflow needs fewer than 15


MERGE_TAG = "tag:yaml.org,2002:merge"


class YamlTooLarge(yaml.YAMLError):
    """A document whose aliases or nesting exceed the caps (``str()`` is one line)."""


class BoundedLoader(YAML_LOADER):
    """The safe loader, with merge keys (``<<: *a``) counted while they are expanded.

    PyYAML copies every (key, value) pair a merge key brings in while it loads (``flatten_mapping``),
    before ``expanded_size`` can see the result: nine merges of nine merges of ... copy 9**N pairs
    (683 bytes took 37 s and 727 MB) into dicts that come out tiny, because the keys repeat. Here
    each mapping's merges are flattened first and their pairs counted *before* they are copied; past
    MAX_NODES pairs in the document the load stops with :class:`YamlTooLarge`. A merge that refers
    to the mapping that holds it is refused as a recursive alias."""

    def __init__(self, stream) -> None:
        super().__init__(stream)
        self._merged = 0                 # pairs merge keys have brought in so far, in this document
        self._flat: set[int] = set()     # mappings already flattened (an alias is flattened once)
        self._open: set[int] = set()     # mappings being flattened (a merge of one of them is recursive)

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        key = id(node)
        if key in self._flat:
            return
        if key in self._open:
            raise YamlTooLarge("a merge key refers to a mapping that contains it (a recursive alias); not read")
        self._open.add(key)
        incoming = 0
        for key_node, value_node in node.value:
            if key_node.tag != MERGE_TAG:
                continue
            subs = ([value_node] if isinstance(value_node, yaml.MappingNode)
                    else value_node.value if isinstance(value_node, yaml.SequenceNode) else [])
            for sub in subs:
                if isinstance(sub, yaml.MappingNode):
                    self.flatten_mapping(sub)
                    incoming += len(sub.value)
        self._merged += incoming
        if self._merged > MAX_NODES:
            raise YamlTooLarge(f"its merge keys (<<) expand to more than {MAX_NODES} entries (a merge-key bomb?); "
                               "not read")
        super().flatten_mapping(node)   # PyYAML's own merge (and its errors), now within the count
        self._open.discard(key)
        self._flat.add(key)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` of ``text``, refused (:class:`YamlTooLarge`) beyond MAX_NODES / MAX_DEPTH (aliases
    and merge keys counted)."""
    try:
        doc = yaml.load(text, Loader=BoundedLoader)
    except RecursionError:   # the pure-Python loader on deep nesting
        raise YamlTooLarge(f"nested deeper than the {MAX_DEPTH}-level cap") from None
    expanded_size(doc)
    return doc


def expanded_size(doc: Any, max_nodes: int = MAX_NODES, max_depth: int = MAX_DEPTH) -> int:
    """How many nodes a full walk of ``doc`` visits (aliases expanded); YamlTooLarge past the caps."""
    memo: dict[int, int] = {}
    open_ids: set[int] = set()
    stack: list[tuple[Any, int, bool]] = [(doc, 1, False)]
    total_of_root = 0
    while stack:
        node, depth, done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        key = id(node)
        if done:
            children = node.values() if isinstance(node, dict) else node
            size = 1 + sum(memo.get(id(c), 1) if isinstance(c, (dict, list)) else 1 for c in children)
            size += len(node) if isinstance(node, dict) else 0   # the keys
            open_ids.discard(key)
            memo[key] = size
            if size > max_nodes:
                raise YamlTooLarge(f"its aliases expand to more than {max_nodes} nodes (an alias bomb?); not read")
            total_of_root = size
            continue
        if key in memo:
            continue
        if key in open_ids:
            raise YamlTooLarge("an alias refers to a node that contains it (a recursive alias); not read")
        if depth > max_depth:
            raise YamlTooLarge(f"nested deeper than the {max_depth}-level cap")
        open_ids.add(key)
        stack.append((node, depth, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend((c, depth + 1, False) for c in children if isinstance(c, (dict, list)))
    return total_of_root or 1


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxdict, _SHORT.maxlist, _SHORT.maxstring, _SHORT.maxother = 2, 4, 4, 60, 60


def mapping(value: Any) -> dict:
    """``value`` if it is a mapping, else {}: a crafted file's list or scalar where a mapping belongs
    reads as empty (callers that must refuse it check the type themselves)."""
    return value if isinstance(value, dict) else {}


def sequence(value: Any) -> list:
    """``value`` if it is a list, else []: the same for a list's place."""
    return value if isinstance(value, list) else []


def short(value: Any, limit: int = 120) -> str:
    """A ``repr`` of ``value`` that reads at most a few of its items and is at most ``limit`` characters."""
    text = _SHORT.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."
