"""A yaml file of a config folder of one's own, bounded before Hydra reads it: valid YAML, and at most
:data:`MAX_VALUES` values once its aliases are expanded.

YAML aliases (``*name``) repeat an anchored node (``&name``) without copying it, so nine lines of nine aliases each
stand for 9⁹ values (a "billion laughs"): PyYAML builds them as shared objects, but OmegaConf copies every one into
its own node, which took minutes and 2 GB before failing. The file's node graph (``yaml.compose``: parsed, nothing
constructed) is counted with each alias expanded, each node counted once per place it appears (memoised by node, so
the count itself is linear in the file), and a file beyond the bound is refused, naming it.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from sarnmt.errors import InputError

MAX_VALUES = 100_000  # a packaged config has under 200; a whole composed train config under 1,000
MAX_BYTES = 10 * 2**20  # a config file, not a data file


def expanded_values(node: yaml.Node, memo: dict[int, int]) -> int:
    """The values a composed node stands for once every alias is expanded (scalars, and each mapping or sequence),
    at most ``2 · MAX_VALUES``; a node that contains itself (``&a [*a]``) counts as that many."""
    cap = 2 * MAX_VALUES
    path: set[int] = set()  # the nodes whose subtree is being counted: a child among them is a cycle
    stack: list[tuple[yaml.Node, bool]] = [(node, False)]
    while stack:  # post-order without recursion: a deep file is not a RecursionError
        item, counted = stack.pop()
        if counted:
            memo[id(item)] = min(1 + sum(memo.get(id(child), cap) for child in _children(item)), cap)
            path.discard(id(item))
            continue
        if id(item) in memo:
            continue
        if id(item) in path:
            return cap
        path.add(id(item))
        stack.append((item, True))
        stack.extend((child, False) for child in _children(item) if id(child) not in memo)
    return memo[id(node)]


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def check_yaml_file(path: str | Path) -> None:
    """:raises InputError: ``<path>:<line>: not valid YAML (<problem>)``, ``<path> is larger than ...``, or
    ``<path>: its aliases expand to more than 100,000 values``."""
    path = Path(path)
    if path.stat().st_size > MAX_BYTES:
        raise InputError(f"{path} is larger than {MAX_BYTES // 2**20} MiB, too large for a config file")
    try:
        nodes = list(yaml.compose_all(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader))
    except UnicodeDecodeError as err:
        raise InputError(f"{path}: not UTF-8 (byte {err.object[err.start : err.start + 1]!r} at {err.start})") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        raise InputError(f"{path}{where}: not valid YAML ({err.problem or err.context})") from None
    except (yaml.YAMLError, RecursionError) as err:
        raise InputError(f"{path}: not valid YAML ({type(err).__name__})") from None
    memo: dict[int, int] = {}
    if sum(expanded_values(node, memo) for node in nodes if node is not None) > MAX_VALUES:
        raise InputError(
            f"{path}: its aliases expand to more than {MAX_VALUES:,} values (a config is far smaller; YAML anchors "
            "repeated within repeats grow exponentially, or contain themselves), refused before it is read"
        )
