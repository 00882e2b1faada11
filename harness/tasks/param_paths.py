"""Nested task params addressed by dotted keys.

A task's params may hold sub-models (ER2's ``teacher``, ``speed``) and discriminated unions of them
(ER2's ``workload``). Suites write ``teacher.steps: 400`` (or ``teacher: {steps: 400}``) to set one
nested field; every place that layers params (suite, profile, arm, sweep, tuning, lock) keeps them
as dotted leaves, so a later layer replaces exactly the leaves it names and the siblings keep their
earlier values. ``nest`` turns the leaves back into the nested mapping the model validates.
"""
from __future__ import annotations

import types
from typing import Annotated, Any, Callable, Iterator, Mapping, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo


class ParamPathError(ValueError):
    """A key that names no param: ``keys`` is the path as written (for the file:line), the message
    says what was expected."""

    def __init__(self, keys: tuple[str, ...], problem: str):
        super().__init__(problem)
        self.keys = keys


def submodels(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds: itself, the members of a union, or none (a plain value)."""
    origin = get_origin(annotation)
    if origin is Annotated:
        return submodels(get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return [m for member in get_args(annotation) for m in submodels(member)]
    return [annotation] if isinstance(annotation, type) and issubclass(annotation, BaseModel) else []


def _fields(models: list[type[BaseModel]]) -> dict[str, FieldInfo]:
    """The fields of one model, or of every member of a union (the first declaration of a name)."""
    out: dict[str, FieldInfo] = {}
    for model in models:
        for name, info in model.model_fields.items():
            out.setdefault(name, info)
    return out


def leaf_fields(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """Every settable param by its dotted key (``teacher.steps``), in declaration order."""
    def walk(models: list[type[BaseModel]], prefix: str) -> Iterator[tuple[str, FieldInfo]]:
        for name, info in _fields(models).items():
            inner = submodels(info.annotation)
            if inner:
                yield from walk(inner, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}", info
    return dict(walk([model], ""))


def flatten(model: type[BaseModel], params: Mapping[str, Any], owner: str = "") -> dict[str, Any]:
    """``params`` as dotted leaves, every key checked against ``model``'s fields.

    A mapping given to a sub-model field is spread into its leaves (so it overrides only what it
    names); a dotted key must reach through sub-model fields only. Raises ``ParamPathError``, whose
    message names ``owner`` (``task 'er2'``) where given."""
    return dict(_flatten([model], params, (), (), f" for {owner}" if owner else ""))


def _flatten(models: list[type[BaseModel]], params: Mapping[str, Any], path: tuple[str, ...],
             written: tuple[str, ...], owner: str) -> Iterator[tuple[str, Any]]:
    for key, value in params.items():
        keys = (*written, str(key))
        current, reached = models, path
        for part in str(key).split("."):
            fields = _fields(current)
            if not current:
                raise ParamPathError(keys, f"{'.'.join(reached)!r} is not a nested param (a plain value): "
                                           f"no {part!r} inside it")
            if part not in fields:
                where = f"{'.'.join(reached)!r} takes:" if reached else "valid params:"
                raise ParamPathError(keys, f"unknown param {'.'.join((*reached, part))!r}{owner}; {where} "
                                           f"{', '.join(sorted(fields))}")
            reached, current = (*reached, part), submodels(fields[part].annotation)
        if current and isinstance(value, Mapping):
            yield from _flatten(current, value, reached, keys, owner)
        else:
            yield ".".join(reached), value


def nest(params: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted leaves (or an already nested mapping) -> the nested mapping a params model validates."""
    out: dict[str, Any] = {}
    for key, value in params.items():
        *parents, last = str(key).split(".")
        target = out
        for part in parents:
            child = target.get(part)
            target[part] = child = dict(child) if isinstance(child, Mapping) else {}
            target = child
        if isinstance(value, Mapping) and isinstance(target.get(last), Mapping):
            target[last] = {**target[last], **nest(value)}
        else:
            target[last] = value
    return out


def error_key(model: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, list[str]]:
    """The dotted param a pydantic error location reaches, and the fields of the model it reaches
    (for an unknown key, the model that refused it). A union's tag in the location picks its member."""
    parts: list[str] = []
    models = [model]
    for part in loc:
        if not isinstance(part, str) or not models:
            break
        fields = _fields(models)
        if part in fields:
            parts.append(part)
            models = submodels(fields[part].annotation)
        else:  # a union's tag: the member whose discriminator defaults to it
            models = [m for m in models if any(i.default == part for i in m.model_fields.values())] or models
    return ".".join(parts), sorted(_fields(models))


def kind_or(default: str) -> Callable[[Any], str]:
    """A union's discriminator that reads ``kind`` and falls back to ``default``, so that
    ``workload.pairs: 4`` on a suite that names no kind is judged against the default member."""
    def kind(value: Any) -> str:
        return value.get("kind", default) if isinstance(value, Mapping) else getattr(value, "kind", default)
    return kind


def layered(*layers: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted-leaf layers, later ones winning leaf by leaf. A layer that gives a union another
    ``kind`` than an earlier layer did (``teacher.kind: trained`` over ``constructed``) starts that
    union afresh: the earlier layers' fields of the other kind are dropped."""
    out: dict[str, Any] = {}
    for layer in layers:
        for key, value in layer.items():
            prefix = key.removesuffix("kind")
            if key.endswith(".kind") and out.get(key, value) != value:
                out = {k: v for k, v in out.items() if not k.startswith(prefix)}
        out.update(layer)
    return out
