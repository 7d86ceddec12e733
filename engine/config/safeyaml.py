"""YAML with bounded nesting and bounded alias expansion.

`yaml.safe_load` builds no arbitrary objects, but it happily builds structures far larger than
the text: a 400-byte file of nested aliases ("billion laughs") names 10^9 values, and anything
that later walks the result (validation, an error message, a deep copy) walks all of them. A
recursive alias (`&a [*a]`) builds a cycle, and deep nesting exhausts Python's stack.

So the text is read in passes, all linear in its size: the event stream (no recursion) checks
the nesting depth and counts the values; if the text uses aliases, the composed node graph
(shared alias nodes, at most as many nodes as events) gets its expanded size and depth computed
once per node, iteratively, which also finds cycles; only then are Python objects built. Limits
are generous for a scenario (a few hundred values) and for its longest list (`arrival.times`),
and keep everything after parsing (validation, error lists) well under a second.
"""

from __future__ import annotations

from typing import Any

import yaml

from .literal import clip

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: fast on big files
MAX_DEPTH = 32
MAX_VALUES = 200_000


class YamlLimitError(ValueError):
    """The text is valid YAML but too deep, too large once aliases are expanded, or recursive."""


class YamlValueError(YamlLimitError):
    """A scalar Python will not build (an integer of more than 4300 digits)."""


def load(text: str, max_depth: int = MAX_DEPTH, max_values: int = MAX_VALUES) -> Any:
    """Parse one YAML document safely (yaml.YAMLError if malformed, YamlLimitError if too big)."""
    aliases = _check_events(text, max_depth, max_values)
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        if aliases:
            _check_expansion(node, max_depth, max_values)
        try:
            return loader.construct_document(node)
        except (ValueError, OverflowError) as err:  # e.g. an integer of more than 4300 digits
            raise YamlValueError(f"a value cannot be read: {clip(str(err), 80)}") from None
    finally:
        loader.dispose()


def _check_events(text: str, max_depth: int, max_values: int) -> bool:
    """Depth and number of values as written; True if the text uses aliases."""
    depth = values = 0
    aliases = False
    for event in yaml.parse(text, Loader=_Loader):
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            depth += 1
            if depth > max_depth:
                line = event.start_mark.line + 1 if event.start_mark else "?"
                raise YamlLimitError(f"nested more than {max_depth} levels deep (line {line})")
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            depth -= 1
            continue
        elif isinstance(event, yaml.AliasEvent):
            aliases = True
        elif not isinstance(event, yaml.ScalarEvent):
            continue
        values += 1
        if values > max_values:
            raise YamlLimitError(f"more than {max_values:,} values")
    return aliases


def _check_expansion(root: yaml.Node, max_depth: int, max_values: int) -> None:
    """Expanded size and depth of the node graph (aliases are shared nodes), without recursion."""
    size: dict[int, int] = {}
    deep: dict[int, int] = {}
    open_: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        if done:
            kids = _children(node)
            size[key] = 1 + sum(size[id(k)] for k in kids)
            deep[key] = 1 + max((deep[id(k)] for k in kids), default=0)
            open_.discard(key)
            if size[key] > max_values:
                raise YamlLimitError(f"aliases expand to more than {max_values:,} values")
            if deep[key] > max_depth:
                raise YamlLimitError(f"aliases expand to more than {max_depth} levels of nesting")
            continue
        if key in size:
            continue
        if key in open_:
            raise YamlLimitError("an alias refers to a value that contains it (a cycle)")
        open_.add(key)
        stack.append((node, True))
        for kid in _children(node):
            if id(kid) in open_:
                raise YamlLimitError("an alias refers to a value that contains it (a cycle)")
            if id(kid) not in size:
                stack.append((kid, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []
