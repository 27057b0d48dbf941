"""The one rule for every config group that chooses code (parser, relations, translator, data, review):
the group's `name` picks a class from the group's table, and its other keys are that class's
constructor's keyword arguments, checked against the constructor before anything is built.

Each table sits beside the classes it names; a class in it may be given as "module:Class", imported
only when chosen (a backend's heavy imports are paid only by the runs that use it).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Mapping

from repair.errors import UserError


def constructor_kwargs(kind: str, cls: type, options: Mapping[str, Any]) -> dict[str, Any]:
    """`options` checked against `cls.__init__`: an unknown key is a UserError that names it and the
    keys there are. A class that takes **kwargs names what it takes through them in `extra_options`."""
    params = inspect.signature(cls.__init__).parameters
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    known = [n for n, p in params.items() if n != "self" and p.kind in
             (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)]
    known += list(getattr(cls, "extra_options", ()))
    unknown = [k for k in options if k not in known]
    if unknown and (not takes_any or hasattr(cls, "extra_options")):
        raise UserError(f"{kind} has no option {', '.join(map(repr, unknown))} "
                        f"(its options: {', '.join(known) or 'none'})")
    return dict(options)


def choose(group: str, table: Mapping[str, type | str], name: Any) -> type:
    """The class `name` stands for in `group`'s table; an unknown name is a UserError listing the names."""
    if name not in table:
        raise UserError(f"{group}={name}: unknown {group}; choose one of {', '.join(table)}")
    cls = table[name]
    if isinstance(cls, str):
        module, _, attr = cls.partition(":")
        cls = getattr(importlib.import_module(module), attr)
    return cls


def build(group: str, table: Mapping[str, type | str], cfg: Mapping[str, Any], **overrides: Any) -> Any:
    """An object from a config group's plain values: `name` picks the class, the other keys (with
    `overrides` in their place) are checked against its constructor and passed to it."""
    options = dict(cfg)
    name = options.pop("name", None)
    options.update(overrides)
    cls = choose(group, table, name)
    return cls(**constructor_kwargs(f"{group}={name}", cls, options))
