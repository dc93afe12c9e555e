"""Read and check a scenario file; every problem is one :class:`InputError` line.

The message names the file, the line, the field and, where there is a fixed
set, the valid choices::

    scenarios/x.yaml:7: protocols[1]: unknown protocol 'lll' (valid: barrier, simple, ll, ...)
"""
from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from collsim.errors import InputError
from collsim.scenario.spec import FIELD_HELP, Scenario, ScenarioFile

__all__ = ["load_scenario", "scenario_from_dict"]

LineOf = Callable[[tuple[Any, ...]], "int | None"]

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")

_EXPECT = {
    "name": "a name",
    "description": "text",
    "topology": "a preset name or a topology mapping",
    "ranks": "a rank count, a list of counts or a range such as '2..8'",
    "sizes": "a size, a list of sizes or a range such as '8B..64MiB x2'",
    "algorithms": "an algorithm name or a list of them",
    "protocols": "a protocol name or a list of them",
    "launch": "eager, graph or a list of both",
    "channels": "a positive whole number or null",
    "dtype": "a dtype name",
    "op": "a reduction operator name",
    "model": "a model name",
    "output": "a directory path",
    "costs": "a mapping of cost parameters",
}


def _field_name(path: tuple[Any, ...]) -> str:
    """``("sizes", 3)`` → ``"sizes[3]"``; ``("costs", "a")`` → ``"costs.a"``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _parse_field(text: str | None) -> tuple[Any, ...]:
    """Inverse of :func:`_field_name` (best effort)."""
    if not text:
        return ()
    parts: list[Any] = []
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", text):
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    return tuple(parts)


class _Where:
    """Builds located errors for one scenario source."""

    def __init__(self, file: str | None, line_of: LineOf | None) -> None:
        self.file = file
        self.line_of = line_of

    def line(self, path: tuple[Any, ...]) -> int | None:
        if self.line_of is None:
            return None
        path = tuple(path)
        while True:
            try:
                line = self.line_of(path)
            except Exception:  # a line table is a convenience, never a failure
                line = None
            if line is not None or not path:
                return line
            path = path[:-1]

    def error(self, path: tuple[Any, ...], message: str, choices: Any = None) -> InputError:
        return InputError(
            message,
            file=self.file,
            line=self.line(path),
            field=_field_name(path) or None,
            choices=choices,
        )

    def attach(self, err: InputError, path: tuple[Any, ...]) -> InputError:
        """Re-raise ``err`` located at ``path`` (inner field of ``err`` appended) unless it has a file."""
        if err.file:
            return err
        inner = _parse_field(err.field)
        if inner[: len(path)] == path:
            full = inner
        else:
            full = tuple(path) + inner
        return type(err)(
            err.message, file=self.file, line=self.line(full), field=_field_name(full) or None, choices=err.choices
        )


def _data_path(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Keep the parts of a pydantic ``loc`` that index ``data`` (drop union-member tags)."""
    path: list[Any] = []
    cur = data
    for part in loc:
        if isinstance(cur, Mapping) and part in cur:
            path.append(part)
            cur = cur[part]
        elif isinstance(cur, list) and isinstance(part, int) and 0 <= part < len(cur):
            path.append(part)
            cur = cur[part]
    return tuple(path)


def _from_validation(err: ValidationError, data: Mapping[str, Any], where: _Where) -> InputError:
    errors = err.errors(include_url=False)
    # The first problem in file order.
    def order(e: dict[str, Any]) -> tuple[int, int]:
        path = _data_path(data, tuple(e["loc"]))
        return (where.line(path) or 0, 0 if e["type"] == "extra_forbidden" else 1)

    first = min(errors, key=order)
    loc = tuple(first["loc"])
    path = _data_path(data, loc)
    if first["type"] == "extra_forbidden":
        key = loc[-1]
        return where.error((key,), f"unknown key {key!r}", choices=list(ScenarioFile.model_fields))
    if first["type"] == "missing":
        key = loc[0]
        return where.error((), f"missing required key {key!r}: {FIELD_HELP.get(str(key), '')}".rstrip(": "))
    top = str(path[0]) if path else str(loc[0])
    value = first.get("input")
    return where.error(path or (top,), f"expected {_EXPECT.get(top, 'another value')}, got {value!r}")


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _names(
    where: _Where, key: str, raw: Any, valid: list[str] | tuple[str, ...], what: str, default: tuple[str, ...]
) -> tuple[str, ...]:
    if raw is None:
        return tuple(default)
    items = _as_list(raw)
    if not items:
        raise where.error((key,), f"empty list; leave {key} out to use all", choices=valid)
    indexed = not isinstance(raw, str)
    for i, item in enumerate(items):
        if item not in valid:
            raise where.error((key, i) if indexed else (key,), f"unknown {what} {item!r}", choices=valid)
    return tuple(dict.fromkeys(items))


def _resolve_topology(spec: Any, base_dir: Path | None, where: _Where) -> Any:
    from collsim.topology import load_topology
    from collsim.yamlsource import Locator, no_lines

    target = spec
    if isinstance(spec, str) and base_dir is not None and spec.endswith((".yaml", ".yml")):
        candidate = base_dir / spec
        if candidate.exists():
            target = str(candidate)
    locator = Locator(where.file, where.line_of or no_lines, ("topology",))
    try:
        return load_topology(target, locator=locator)
    except InputError as err:
        raise where.attach(err, ("topology",)) from None


def scenario_from_dict(
    data: Any,
    *,
    file: str | None = None,
    line_of: LineOf | None = None,
    default_name: str | None = None,
    base_dir: Path | None = None,
    model: str | None = None,
) -> Scenario:
    """Check a scenario given as plain data (what the YAML file holds).

    ``model``, when given, overrides the file's ``model:`` for checking
    ``costs:`` (the model that will run is the one that validates them).
    """
    from collsim.ir.registry import ALGORITHMS, list_protocols
    from collsim.models import DTYPES, LAUNCH_MODES, OPS, list_models, validate_costs
    from collsim.units import parse_ranks, parse_sizes

    where = _Where(file, line_of)
    if not isinstance(data, Mapping):
        raise where.error((), f"a scenario is a mapping of keys ({', '.join(ScenarioFile.model_fields)}), "
                          f"got {type(data).__name__}")
    try:
        spec = ScenarioFile.model_validate(data)
    except ValidationError as err:
        raise _from_validation(err, data, where) from None

    if spec.sweep is not None:
        raise where.error(("sweep",), "sweep is not supported yet; list several values in ranks, sizes, "
                          "algorithms, protocols or launch instead")

    name = spec.name if spec.name is not None else (default_name or "scenario")
    if not _NAME_RE.match(name):
        raise where.error(("name",), f"name {name!r} must be letters, digits, '.', '_' or '-' (it names a directory)")

    # Plain names first: they are cheap and their messages list the choices.
    algorithms = _names(where, "algorithms", spec.algorithms, tuple(ALGORITHMS), "algorithm", tuple(ALGORITHMS))
    protocols_all = list(list_protocols())
    protocols = _names(where, "protocols", spec.protocols, protocols_all, "protocol", tuple(protocols_all))
    launch = _names(where, "launch", spec.launch, LAUNCH_MODES, "launch mode", ("graph",))
    if spec.dtype not in DTYPES:
        raise where.error(("dtype",), f"unknown dtype {spec.dtype!r}", choices=list(DTYPES))
    if spec.op not in OPS:
        raise where.error(("op",), f"unknown reduction op {spec.op!r}", choices=list(OPS))
    models = list_models()
    if spec.model is not None and spec.model not in models:
        raise where.error(("model",), f"unknown model {spec.model!r}", choices=models)
    if spec.channels is not None and spec.channels < 1:
        raise where.error(("channels",), f"channels must be at least 1 (or null to choose), got {spec.channels}")
    elem = DTYPES[spec.dtype]

    ranks = _parse_list(where, "ranks", spec.ranks, parse_ranks)
    sizes = _parse_list(where, "sizes", spec.sizes, parse_sizes)
    for i, size in enumerate(sizes):
        if size % elem:
            raise where.error(
                _item_path("sizes", spec.sizes, size, parse_sizes),
                f"size {size} B is not a whole number of {spec.dtype} elements ({elem} B each)",
            )

    costs = dict(spec.costs or {})
    if costs:
        try:
            validate_costs(model if model is not None else spec.model, costs)
        except InputError as err:
            raise where.attach(err, ("costs",)) from None

    topology = _resolve_topology(spec.topology, base_dir, where)
    for n in ranks:
        if n > topology.num_gpus:
            raise where.error(
                _item_path("ranks", spec.ranks, n, parse_ranks),
                f"{n} ranks requested but topology {topology.name!r} has {topology.num_gpus} GPUs",
            )

    output = Path(spec.output) if spec.output else Path("reports") / name
    return Scenario(
        name=name,
        topology=topology,
        topology_spec=spec.topology,
        ranks=tuple(ranks),
        sizes=tuple(sizes),
        algorithms=algorithms,
        protocols=protocols,
        launch=launch,
        channels=spec.channels,
        dtype=spec.dtype,
        elem_bytes=elem,
        op=spec.op,
        model=spec.model,
        output=output,
        costs=costs,
        description=spec.description,
        source=file,
    )


def _parse_list(where: _Where, key: str, raw: Any, parse: Callable[[Any], list[int]]) -> list[int]:
    """Parse item by item so an error points at the item that is wrong."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise where.error((key,), f"empty list: {FIELD_HELP[key]}")
    out: list[int] = []
    for i, item in enumerate(items):
        try:
            out.extend(parse(item))
        except InputError as err:
            raise where.error((key, i) if isinstance(raw, list) else (key,), err.message, err.choices) from None
    return list(dict.fromkeys(out))


def _item_path(key: str, raw: Any, value: int, parse: Callable[[Any], list[int]]) -> tuple[Any, ...]:
    """The path of the list item that produced ``value``."""
    if isinstance(raw, list):
        for i, item in enumerate(raw):
            try:
                if value in parse(item):
                    return (key, i)
            except InputError:
                continue
    return (key,)


def load_scenario(source: str | Path | Mapping[str, Any] | Scenario, *, model: str | None = None) -> Scenario:
    """Load and check a scenario.

    Parameters
    ----------
    source : path, mapping or Scenario
        A scenario YAML file, the same content as a mapping, or an already
        loaded scenario (returned as is).
    model : str, optional
        The model the scenario will run with, if not the file's; it checks ``costs:``.

    Returns
    -------
    Scenario

    Raises
    ------
    InputError
        One line naming the file, line and field, with the valid choices.
    """
    if isinstance(source, Scenario):
        return source
    if isinstance(source, Mapping):
        return scenario_from_dict(source, file=None, default_name="scenario", model=model)
    from collsim.yamlsource import load_yaml_with_lines

    path = Path(source)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give a scenario .yaml file")
    data, line_of = load_yaml_with_lines(path, str(path))
    if data is None:
        raise InputError("the scenario file is empty", file=str(path))
    return scenario_from_dict(
        data, file=str(path), line_of=line_of, default_name=path.stem, base_dir=path.parent, model=model
    )
