"""Frozen-dataclass configs: strict loading, presets as small diffs, JSON round trips.

Every experiment config in initlab is a ``@dataclass(frozen=True)``. This module gives the three
operations all of them need:

* :func:`from_dict` -- build a config from a mapping, raising ``ValueError`` on unknown keys and
  ``TypeError`` on values of the wrong type (naming the key and the expected type);
* :func:`derive` -- a preset written as a small diff of a base (``derive(BASE, epochs=3)``), with the
  same checks;
* :func:`to_dict` / :func:`load_config` -- the resolved config as plain JSON data, and back (writing it next to
  results is :func:`initlab.runs.save_config`: files belong to the run layer, which imports this module, never
  the other way round);
* :func:`ranged` / :func:`check_ranges` -- every numeric field declares its range once, beside the field
  (``lr: float = ranged(1e-3, "(0, inf)")``), and one checker refuses a value outside it, naming the field, the
  value and the range. Each config calls :func:`check_ranges` first in its ``__post_init__``, so no config
  outside its ranges can be built (by a preset, ``--set``, a saved record or code); relations between fields
  (``warmup_epochs < finetune_max_epochs``) stay in that ``__post_init__``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from pathlib import Path
from typing import Any, Mapping, TypeVar

from initlab.textio import read_json

C = TypeVar("C")

__all__ = ["from_dict", "derive", "to_dict", "load_config", "check_type", "parse_overrides", "later_field",
           "absolute_paths", "Range", "RangeError", "ranged", "field_range", "check_ranges", "unranged_fields"]

#: dataclass field metadata of :func:`later_field`
_OMIT_AT_DEFAULT = "omit_at_default"
#: dataclass field metadata of :func:`ranged`: the field's :class:`Range`
_RANGE = "range"


def later_field(default: Any, within: "str | None" = None) -> Any:
    """A config field added after runs were saved: :func:`to_dict` leaves it out while it holds ``default`` (a
    hashable value), so the saved config records and cell keys of those runs (made before the field existed) stay
    what they were and the runs still resume; set to anything else, it is recorded like any field. :func:`from_dict`
    of a record without it gives ``default``. ``within``: its range, as for :func:`ranged`."""
    meta: dict[str, Any] = {_OMIT_AT_DEFAULT: True}
    if within is not None:
        meta[_RANGE] = Range.parse(within)
    return dataclasses.field(default=default, metadata=meta)


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of numbers, written as in mathematics: ``"[1, inf)"``, ``"(0, 1]"``, ``"[-1, inf)"``.

    ``inf`` / ``-inf`` ends are open by their nature (``"(0, inf)"`` holds every finite number > 0, so NaN and
    infinity are outside); write ``"[0, inf]"`` to admit infinity. NaN is outside every range.
    """

    low: float
    high: float
    low_closed: bool
    high_closed: bool

    @classmethod
    def parse(cls, text: str) -> "Range":
        """``"[a, b]"``, ``"(a, b)"``, ``"[a, b)"`` or ``"(a, b]"``; ``a``, ``b`` numbers, ``inf`` or ``-inf``.

        Raises:
            ValueError: ``text`` is not such an interval, or its low end is above its high end.
        """
        t = text.strip()
        try:
            if t[0] not in "[(" or t[-1] not in "])":
                raise ValueError
            lo, hi = (float(x) for x in t[1:-1].split(","))
        except (ValueError, IndexError):
            raise ValueError(f"range {text!r}: expected an interval such as '[1, inf)' or '(0, 1]'") from None
        if math.isnan(lo) or math.isnan(hi) or lo > hi:
            raise ValueError(f"range {text!r}: expected low <= high")
        return cls(lo, hi, t[0] == "[", t[-1] == "]")

    def __contains__(self, value: float) -> bool:
        if math.isnan(value):
            return False
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return above and below

    def __str__(self) -> str:
        def end(x: float) -> str:
            if math.isinf(x):
                return "inf" if x > 0 else "-inf"
            return str(int(x)) if x.is_integer() and abs(x) < 2**53 else repr(x)
        return f"{'[' if self.low_closed else '('}{end(self.low)}, {end(self.high)}{']' if self.high_closed else ')'}"


class RangeError(ValueError):
    """A config value outside its field's declared range (:func:`ranged`).

    Attributes:
        owner: the config class's name; field: the field's name (``lr_grid[2]`` for an item); value; range: the
        :class:`Range`; path: the field's place in the configs that hold it (``corpus.vocab_size``) when
        :func:`from_dict` built it nested, else ``""``. The message names ``Owner.field`` or the path, the value
        and the range.
    """

    def __init__(self, owner: str, field: str, value: Any, range: Range, path: str = ""):
        self.owner, self.field, self.value, self.range, self.path = owner, field, value, range, path
        super().__init__(f"{path or owner + '.' + field} = {value!r} is outside its range {range}")

    def within(self, prefix: str) -> "RangeError":
        """The same error placed under ``prefix`` (``"corpus."``); an empty prefix changes nothing."""
        if not prefix:
            return self
        return RangeError(self.owner, self.field, self.value, self.range, prefix + (self.path or self.field))

    def __reduce__(self):
        return (type(self), (self.owner, self.field, self.value, self.range, self.path))


def ranged(default: Any = dataclasses.MISSING, within: str = "", *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A numeric config field with its range: ``n_train: int = ranged(1024, "[1, inf)")``.

    ``within`` is an interval (:meth:`Range.parse`); it applies to the number the field holds, or to every number
    inside it (a tuple of learning rates, the numbers of ``(name, value)`` pairs); ``None`` and strings are not
    numbers and pass. :func:`check_ranges` checks it. The metadata changes nothing :func:`to_dict` writes.

    Raises:
        ValueError: ``within`` is not an interval.
    """
    if not within:
        raise ValueError("ranged: expected its range, e.g. within='[0, inf)'")
    return dataclasses.field(default=default, default_factory=default_factory, metadata={_RANGE: Range.parse(within)})


def field_range(cls: type, name: str) -> "Range | None":
    """The declared :class:`Range` of field ``name`` of the dataclass ``cls`` (None if it declares none)."""
    for f in dataclasses.fields(cls):
        if f.name == name:
            return f.metadata.get(_RANGE)
    raise KeyError(f"{cls.__name__} has no field {name!r}")


def _numbers(value: Any, name: str):
    """``(name, number)`` of every number in ``value`` (a number, or tuples, lists and dict values of them)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return
    if isinstance(value, (int, float)):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            yield from _numbers(v, f"{name}[{i}]")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            yield from _numbers(v, f"{name}[{k!r}]")


def check_ranges(cfg: Any) -> None:
    """Refuse a number of ``cfg`` (a config dataclass) outside its field's declared range (:func:`ranged`).

    Nested configs check their own ranges when they are built, so this looks at ``cfg``'s own fields only.

    Raises:
        RangeError: (a ``ValueError``) naming the field (``lr_grid[2]`` for an item), the value and the range.
    """
    for f in dataclasses.fields(cfg):
        rng = f.metadata.get(_RANGE)
        if rng is None:
            continue
        for name, v in _numbers(getattr(cfg, f.name), f.name):
            if v not in rng:
                raise RangeError(type(cfg).__name__, name, v, rng)


def _holds_numbers(tp: Any) -> bool:
    """Whether the annotation ``tp`` can hold a number (``int``, ``float``, or a container or union of them)."""
    if tp in (int, float):
        return True
    if tp is bool or dataclasses.is_dataclass(tp):
        return False
    return any(_holds_numbers(a) for a in typing.get_args(tp) if a is not Ellipsis)


def unranged_fields(cls: type, _seen: "set[type] | None" = None) -> list[str]:
    """``Class.field`` of every field of the config dataclass ``cls``, and of the configs nested in it, that can
    hold a number but declares no range (:func:`ranged`): what a test of "every numeric field has a range" lists."""
    seen = set() if _seen is None else _seen
    if cls in seen:
        return []
    seen.add(cls)
    out = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if _holds_numbers(tp) and _RANGE not in f.metadata:
            out.append(f"{cls.__name__}.{f.name}")
        for arm in [tp, *typing.get_args(tp)]:
            if dataclasses.is_dataclass(arm) and isinstance(arm, type):
                out += unranged_fields(arm, seen)
    return out


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def check_type(value: Any, tp: Any, name: str) -> Any:
    """Check ``value`` against the annotation ``tp`` and return it, converted where lossless.

    Supported annotations: ``bool``, ``int``, ``float`` (ints are accepted and converted), ``str``,
    ``None``, ``Optional``/unions, ``Literal``, ``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]``,
    ``dict[K, V]`` and nested frozen dataclasses (given as mappings).

    Raises:
        TypeError: naming ``name`` and the expected type when ``value`` does not fit.
        ValueError: for a ``Literal`` value outside the allowed set, or unknown nested keys.
    """
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is Any:
        return value
    if origin is typing.Literal:
        if value not in args:
            raise ValueError(f"{name}: expected one of {list(args)}, got {value!r}")
        return value
    if origin in (typing.Union, types.UnionType):
        errors = []
        for arm in args:
            try:
                return check_type(value, arm, name)
            except RangeError:  # the value has this arm's shape: its range is the error
                raise
            except (TypeError, ValueError) as err:  # try the next arm
                errors.append(str(err))
        raise TypeError(f"{name}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if tp is type(None):
        if value is not None:
            raise TypeError(f"{name}: expected None, got {value!r}")
        return None
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"{name}: expected a mapping for {tp.__name__}, got {type(value).__name__}")
        return from_dict(tp, value, _prefix=f"{name}.")
    if origin in (tuple, list, dict):
        return _check_container(value, tp, origin, args, name)
    return _check_scalar(value, tp, name)
    return value


def _check_container(value: Any, tp: Any, origin: Any, args: tuple, name: str) -> Any:
    """``tuple[X, ...]``, ``tuple[X, Y]``, ``list[X]`` and ``dict[K, V]`` for :func:`check_type`."""
    if origin is dict:
        if not isinstance(value, Mapping):
            raise TypeError(f"{name}: expected a mapping, got {type(value).__name__}")
        kt, vt = args if args else (Any, Any)
        return {check_type(k, kt, f"{name} key"): check_type(v, vt, f"{name}[{k!r}]") for k, v in value.items()}
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{name}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")
    if origin is tuple and args and not (len(args) == 2 and args[1] is Ellipsis):
        if len(value) != len(args):
            raise TypeError(f"{name}: expected {len(args)} items, got {len(value)}")
        items = [check_type(v, a, f"{name}[{i}]") for i, (v, a) in enumerate(zip(value, args))]
    else:
        arm = args[0] if args else Any
        items = [check_type(v, arm, f"{name}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if origin is tuple else list(items)


def _check_scalar(value: Any, tp: Any, name: str) -> Any:
    """``bool``, ``int``, ``float`` (ints accepted and converted), ``str`` and plain classes for :func:`check_type`."""
    if tp is bool:
        if not isinstance(value, bool):
            raise TypeError(f"{name}: expected bool, got {type(value).__name__} {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name}: expected int, got {type(value).__name__} {value!r}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name}: expected float, got {type(value).__name__} {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise TypeError(f"{name}: expected str, got {type(value).__name__} {value!r}")
        return value
    if isinstance(tp, type):
        if not isinstance(value, tp):
            raise TypeError(f"{name}: expected {tp.__name__}, got {type(value).__name__} {value!r}")
        return value
    return value


def from_dict(cls: type[C], data: Mapping[str, Any], _prefix: str = "") -> C:
    """Build the frozen dataclass ``cls`` from ``data``, strictly.

    Raises:
        ValueError: ``data`` has keys that are not fields of ``cls`` (all unknown keys are named).
        TypeError: a value does not match its field's annotation.
    """
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    if not isinstance(data, Mapping):
        raise TypeError(f"config for {cls.__name__}: expected a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(
            f"unknown config key(s) {', '.join(_prefix + k for k in unknown)} for {cls.__name__}; "
            f"known keys: {', '.join(sorted(fields))}"
        )
    kwargs = {k: check_type(v, hints[k], _prefix + k) for k, v in data.items()}
    try:
        return cls(**kwargs)
    except RangeError as err:
        raise err.within(_prefix) from None


def derive(base: C, **changes: Any) -> C:
    """A preset as a small diff of ``base``: ``derive(BASE, lr=1e-3)``. Same checks as :func:`from_dict`."""
    merged = to_dict(base)
    for key, value in changes.items():
        merged[key] = to_dict(value) if dataclasses.is_dataclass(value) else value
    return from_dict(type(base), merged)


def to_dict(cfg: Any) -> dict[str, Any]:
    """The config as JSON-ready plain data (tuples become lists); a :func:`later_field` at its default is left out."""
    def plain(v: Any) -> Any:
        if dataclasses.is_dataclass(v):
            return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)
                    if not (f.metadata.get(_OMIT_AT_DEFAULT) and getattr(v, f.name) == f.default)}
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return plain(cfg)


def load_config(cls: type[C], path: str | Path) -> C:
    """Read a config written by :func:`initlab.runs.save_config` (or a plain mapping of fields) strictly.

    The file is read with :func:`initlab.textio.read_json` (UTF-8, a leading byte-order mark dropped).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: the file is not UTF-8 (:class:`initlab.textio.TextDecodeError`), not JSON, or has unknown keys.
    """
    path = Path(path)
    try:
        data = read_json(path)
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not valid JSON ({err})") from None
    if isinstance(data, dict) and "config" in data and "config_class" in data:
        data = data["config"]
    return from_dict(cls, data)


def parse_overrides(items: "list[str] | tuple[str, ...]", flag: str = "--set") -> dict[str, Any]:
    """Command-line overrides ``["max_steps=10", 'eval_sets=["a"]', "name=x"]`` -> a dict for :func:`derive`.

    Each value is read as JSON when it parses (numbers, booleans, lists), else kept as a string; the
    result still goes through :func:`derive`'s strict checks.

    Raises:
        ValueError: an item without ``=`` (naming ``flag`` and the item).
    """
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ValueError(f"{flag} {item!r}: expected FIELD=VALUE")
        key, value = item.split("=", 1)
        try:
            out[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            out[key.strip()] = value
    return out


def absolute_paths(cfg: C, fields: "tuple[str, ...] | list[str]") -> C:
    """``cfg`` with each of ``fields`` that holds a relative path (a non-empty string) made absolute against this
    process's working directory (:func:`os.path.abspath`: ``..`` collapsed, links kept as the user named them).

    A run that sends its config to other processes (Dask workers, each in its own working directory) calls it
    before the config leaves the client, so that every cell reads the files the client named and the saved config
    records them. Fields that are None, empty or already absolute are kept.
    """
    import os

    changes = {}
    for name in fields:
        value = getattr(cfg, name)
        if isinstance(value, str) and value and not os.path.isabs(value):
            changes[name] = os.path.abspath(value)
    return dataclasses.replace(cfg, **changes) if changes else cfg
