"""JSON objects read into frozen dataclasses, checked field by field against their type hints.

The results tree's files are written by one version of vcast and read by another; a reader must
say *which* field of *which* file is wrong, not fail later on a ``KeyError``. :func:`from_json`
accepts the hints these records use (``int``, ``float``, ``str``, ``bool``, ``Any``,
``Optional[X]``, ``list[X]``, ``dict[str, X]`` and nested dataclasses); a field the object lacks
takes the dataclass default (a file from before the field existed), a field the dataclass lacks is
an error (a file from a newer vcast, or not a record at all).
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any, Union


class RecordError(ValueError):
    """A JSON object that is not the record it should be; the message names the field."""


def from_json(cls: type, data: Any, where: str) -> Any:
    """``data`` (a parsed JSON object) as the dataclass ``cls``; ``where``: how to name it in an error
    (``"cell.json"``, ``"cell.json: efficiency"``).

    Raises:
        RecordError: ``data`` is not an object, lacks a field without a default, has a field ``cls``
            does not, or a value of the wrong type.
    """
    if not isinstance(data, dict):
        raise RecordError(f"{where}: expected a JSON object, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    known = {item.name: item for item in dataclasses.fields(cls) if item.init}
    unknown = sorted(set(data) - set(known))
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {', '.join(unknown)} (written by a newer vcast?)")
    values = {}
    for name, item in known.items():
        if name not in data:
            if item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING:
                raise RecordError(f"{where}: field {name!r} is missing")
            continue
        values[name] = _value(hints[name], data[name], f"{where}: {name}")
    return cls(**values)


def to_json(record: Any) -> Any:
    """``record`` (a dataclass, or lists / dicts of them) as plain JSON values."""
    if dataclasses.is_dataclass(record) and not isinstance(record, type):
        return {item.name: to_json(getattr(record, item.name)) for item in dataclasses.fields(record)}
    if isinstance(record, (list, tuple)):
        return [to_json(value) for value in record]
    if isinstance(record, dict):
        return {key: to_json(value) for key, value in record.items()}
    return record


def _value(hint: Any, value: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return value
    if origin is Union:
        if value is None and type(None) in args:
            return None
        options = [arg for arg in args if arg is not type(None)]
        if len(options) == 1:
            return _value(options[0], value, where)
        for option in options:
            try:
                return _value(option, value, where)
            except RecordError:
                continue
        raise RecordError(f"{where}: {value!r} is none of {', '.join(_name(o) for o in options)}")
    if dataclasses.is_dataclass(hint):
        return from_json(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise RecordError(f"{where}: expected a list, got {_kind(value)}")
        return [_value(args[0], entry, f"{where}[{index}]") for index, entry in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise RecordError(f"{where}: expected an object, got {_kind(value)}")
        return {str(key): _value(args[1], entry, f"{where}.{key}") for key, entry in value.items()}
    if hint is bool:
        if not isinstance(value, bool):
            raise RecordError(f"{where}: expected true or false, got {_kind(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise RecordError(f"{where}: expected an integer, got {_kind(value)}")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise RecordError(f"{where}: expected a number, got {_kind(value)}")
        return value  # an int stays one: the record reads back as it was written
    if hint is str:
        if not isinstance(value, str):
            raise RecordError(f"{where}: expected a string, got {_kind(value)}")
        return value
    raise TypeError(f"{where}: type hint {hint!r} is not supported by from_json")


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"[:80]


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", str(hint))
