"""A schema field's type as OmegaConf enforces it: the node its annotation names (IntegerNode, FloatNode, ...) and
what that node makes of a value ("4" -> 4, 1 -> 1.0, "yes" -> True), read off the dataclass annotations without
building a structured config (building one reads every field of every dataclass; a check or a sweep row needs a few).
"""

from __future__ import annotations

import functools
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin, get_type_hints

from omegaconf.errors import OmegaConfBaseException
from omegaconf.nodes import BooleanNode, FloatNode, IntegerNode, StringNode, ValueNode

NODES: dict[type, type[ValueNode]] = {int: IntegerNode, float: FloatNode, bool: BooleanNode, str: StringNode}
REFUSED = object()  # what node_value returns for a value the field's node does not take


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    """A dataclass's field annotations, resolved (cached: the schema's never change)."""
    return get_type_hints(cls)


def node_value(value: Any, kind: Any) -> Any:
    """`value` as the OmegaConf node of a scalar field annotated `kind` (`X | None` optional) holds it, or REFUSED:
    also for a container value, for a `kind` that names no scalar node (a list, a section, a union of types), and for
    an interpolation or MISSING ("???"), which a node stores unchecked and only fails once read."""
    optional = get_origin(kind) in (Union, UnionType) and NoneType in get_args(kind)
    if optional:
        rest = [a for a in get_args(kind) if a is not NoneType]
        kind = rest[0] if len(rest) == 1 else None
    node = NODES.get(kind)
    if node is None or isinstance(value, (dict, list, tuple)):
        return REFUSED
    if isinstance(value, str) and ("${" in value or value == "???"):  # an interpolation, MISSING: no value of its own
        return REFUSED
    try:
        return node(value=value, is_optional=optional)._value()
    except OmegaConfBaseException:
        return REFUSED
