"""Read and check a scenario file; every problem is one :class:`InputError` line.

The message names the file, the line, the field and, where there is a fixed
set, the valid choices::

    scenarios/x.yaml:7: protocols[1]: unknown protocol 'lll' (valid: barrier, simple, ll, ...)
"""
from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from collsim.config import (DTYPES, LAUNCH_MODES, algorithm_names, check_algorithm, check_channels,
                            check_channels_fit, check_choice, check_dtype, check_launch, check_op, check_ranks_fit,
                            check_size_elements, check_size_fits)
from collsim.errors import InputError
from collsim.ir.registry import list_protocols
from collsim.models import performance_model, validate_costs
from collsim.resultsfile import COLUMNS
from collsim.scenario.costs import profile_costs
from collsim.scenario.spec import FIELD_HELP, Scenario, ScenarioFile, apply_cost
from collsim.topology import load_topology
from collsim.units import parse_ranks, parse_sizes
from collsim.yamlsource import Locator, load_yaml_with_lines, no_lines

__all__ = ["load_scenario", "scenario_from_dict", "parse_sweep_range", "check_costs"]

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
    "profile": "a path to a profile file",
    "sweep": "a mapping of cost parameters to lists or ranges of values",
}

#: Most combinations a ``sweep:`` may ask for.
MAX_SWEEP_POINTS = 10_000

_NUM = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?"
_SWEEP_RANGE = re.compile(
    rf"^\s*(?P<start>{_NUM})\s*\.\.\s*(?P<end>{_NUM})\s*(?:(?P<kind>[x*+])\s*(?P<step>{_NUM}))?\s*$"
)


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


def _checked(where: _Where, path: tuple[Any, ...], rule: Callable[..., Any], *args: Any) -> Any:
    """``rule(*args)`` (a rule of :mod:`collsim.config` or the model registry), its error located at ``path``."""
    try:
        return rule(*args)
    except InputError as err:
        raise where.error(path, err.message, err.choices) from None


def _names(
    where: _Where, key: str, raw: Any, rule: Callable[[Any], str], valid: Sequence[str], default: tuple[str, ...]
) -> tuple[str, ...]:
    """The names ``key`` lists (one name or a list of them), each checked by ``rule``; ``default`` when absent."""
    if raw is None:
        return tuple(default)
    items = _as_list(raw)
    if not items:
        raise where.error((key,), f"empty list; leave {key} out to use all", choices=list(valid))
    indexed = not isinstance(raw, str)
    for i, item in enumerate(items):
        _checked(where, (key, i) if indexed else (key,), rule, item)
    return tuple(dict.fromkeys(items))


def _shipped_protocol(name: Any, shipped: tuple[str, ...]) -> str:
    """``name`` if a shipped protocol has it; a protocol file gets told where files go instead."""
    if isinstance(name, str) and (name.endswith(".py") or "/" in name):
        raise InputError(f"{name!r} is a protocol file: a scenario sweeps shipped protocols; simulate a file "
                         f"with `collsim simulate -p {name}` and compare it with the shipped ones with "
                         f"`collsim review {name}`", field="protocol", choices=list(shipped))
    return check_choice(name, shipped, "protocol", "protocol")


def _resolve_topology(spec: Any, base_dir: Path | None, where: _Where) -> Any:
    target = spec
    if isinstance(spec, str) and base_dir is not None and spec.endswith((".yaml", ".yml")):
        candidate = base_dir / spec
        if candidate.exists():
            target = str(candidate)
        elif not Path(spec).exists():  # named here: say so here, with where it was looked for
            looked = [str(candidate)] + ([spec] if str(candidate) != spec else [])
            raise where.error(("topology",), f"topology file {spec!r} not found (looked for "
                                             f"{' and '.join(looked)}; a path relative to the scenario file)")
    if isinstance(spec, str) and (base_dir / spec if base_dir is not None else Path(spec)).is_dir():
        raise where.error(("topology",), f"{spec!r} is a directory; give a topology .yaml file or a preset name",
                          choices=None)
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
    profile: str | Path | None = None,
) -> Scenario:
    """Check a scenario given as plain data (what the YAML file holds).

    ``model``, when given, overrides the file's ``model:`` for checking
    ``costs:`` (the model that will run is the one that validates them).
    ``profile``, when given, replaces the file's ``profile:``.
    """
    where = _Where(file, line_of)
    if not isinstance(data, Mapping):
        raise where.error((), f"a scenario is a mapping of keys ({', '.join(ScenarioFile.model_fields)}), "
                          f"got {type(data).__name__}")
    try:
        spec = ScenarioFile.model_validate(data)
    except ValidationError as err:
        raise _from_validation(err, data, where) from None

    name = spec.name if spec.name is not None else (default_name or "scenario")
    if not _NAME_RE.match(name):
        raise where.error(("name",), f"name {name!r} must be letters, digits, '.', '_' or '-' (it names a directory)")

    # Plain names first: they are cheap and their messages list the choices.
    algorithms = _names(where, "algorithms", spec.algorithms, check_algorithm, algorithm_names(), algorithm_names())
    protocols_all = tuple(list_protocols())
    protocols = _names(where, "protocols", spec.protocols, lambda name: _shipped_protocol(name, protocols_all),
                       protocols_all, protocols_all)
    launch = _names(where, "launch", spec.launch, check_launch, LAUNCH_MODES, ("graph",))
    _checked(where, ("dtype",), check_dtype, spec.dtype)
    _checked(where, ("op",), check_op, spec.op)
    if spec.model is not None:
        _checked(where, ("model",), performance_model, spec.model)
    _checked(where, ("channels",), check_channels, spec.channels)

    ranks = _parse_list(where, "ranks", spec.ranks, parse_ranks)
    sizes = _parse_list(where, "sizes", spec.sizes, parse_sizes)
    for size in sizes:
        _checked(where, _item_path("sizes", spec.sizes, size, parse_sizes), check_size_elements, size, spec.dtype)

    costs = dict(spec.costs or {})
    if costs:
        try:
            validate_costs(model if model is not None else spec.model, costs)
        except InputError as err:
            raise where.attach(err, ("costs",)) from None
    profile_path = _profile_path(where, spec.profile, base_dir) if profile is None else str(profile)
    if profile_path is not None:
        costs = _with_profile(where, profile_path, costs, model if model is not None else spec.model,
                              from_file=profile is None)

    sweep = _parse_sweep(where, spec.sweep, costs, model if model is not None else spec.model)

    topology = _resolve_topology(spec.topology, base_dir, where)
    for n in ranks:
        _checked(where, _item_path("ranks", spec.ranks, n, parse_ranks), check_ranks_fit, n, topology)
    for size in sizes:
        _checked(where, _item_path("sizes", spec.sizes, size, parse_sizes), check_size_fits, size, topology)
    _checked(where, ("channels",), check_channels_fit, spec.channels, topology, max(ranks))

    output = Path(spec.output) if spec.output else Path("reports") / name
    output_from = ("output", where.line(("output",))) if spec.output else \
        ("name", where.line(("name",)) if spec.name is not None else None)
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
        elem_bytes=DTYPES[spec.dtype],
        op=spec.op,
        model=spec.model,
        output=output,
        costs=costs,
        description=spec.description,
        source=file,
        sweep=sweep,
        profile=profile_path,
        output_from=output_from,
    )


def _profile_path(where: _Where, raw: str | None, base_dir: Path | None) -> str | None:
    """The file ``profile:`` names, relative to the scenario file's directory."""
    if raw is None:
        return None
    path = Path(raw)
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    if not path.is_file():
        raise where.error(("profile",), f"profile file {raw!r} not found (a path relative to the scenario file, "
                                        "written by 'collsim calibrate')")
    return str(path)


def _with_profile(where: _Where, path: str, costs: dict[str, Any], model: str | None, from_file: bool
                  ) -> dict[str, Any]:
    """The profile's costs with ``costs`` on top; errors point at ``profile:`` when the file named it."""
    try:
        return profile_costs(path, costs, performance_model(model).name)
    except InputError as err:
        if not from_file:
            raise
        # the profile's own message, located at the scenario's profile: line
        raise InputError(f"{path}: {err.message}", file=where.file, line=where.line(("profile",)), field="profile",
                         choices=err.choices) from None


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


def load_scenario(source: str | Path | Mapping[str, Any] | Scenario, *, model: str | None = None,
                  profile: str | Path | None = None) -> Scenario:
    """Load and check a scenario.

    Parameters
    ----------
    source : path, mapping or Scenario
        A scenario YAML file, the same content as a mapping, or an already
        loaded scenario (returned as is).
    model : str, optional
        The model the scenario will run with, if not the file's; it checks ``costs:``.
    profile : path, optional
        A calibrated cost profile to use instead of the file's ``profile:``
        (its costs apply under ``costs:``).

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
        return scenario_from_dict(source, file=None, default_name="scenario", model=model, profile=profile)
    path = Path(source)
    if path.is_dir():
        raise InputError(f"{path} is a directory; give a scenario .yaml file")
    data, line_of = load_yaml_with_lines(path, str(path))
    if data is None:
        raise InputError("the scenario file is empty", file=str(path))
    return scenario_from_dict(
        data, file=str(path), line_of=line_of, default_name=path.stem, base_dir=path.parent, model=model,
        profile=profile,
    )


# ---------------------------------------------------------------------------
# sweep:


def parse_sweep_range(text: str) -> list[int | float]:
    """Expand a sweep range ``START..END +STEP`` or ``START..END xFACTOR`` (``+1`` for whole numbers).

    Steps are exact decimals, so ``0.05..0.2 +0.05`` ends at 0.2, not 0.15000000000000002.
    Whole-number ranges give ints, others floats.

    >>> parse_sweep_range("0.05..0.2 +0.05")
    [0.05, 0.1, 0.15, 0.2]
    >>> parse_sweep_range("1..16 x2"), parse_sweep_range("2..4")
    ([1, 2, 4, 8, 16], [2, 3, 4])
    """
    match = _SWEEP_RANGE.match(text)
    if not match:
        raise InputError(f"cannot read range {text!r}; write e.g. '0.05..0.2 +0.05', '1..16 x2' or '2..8'")
    try:
        start, end = Decimal(match["start"]), Decimal(match["end"])
        step = Decimal(match["step"]) if match["step"] else None
    except InvalidOperation:  # pragma: no cover - the pattern admits decimals only
        raise InputError(f"cannot read range {text!r}") from None
    whole = all(
        part is None or re.fullmatch(r"[-+]?\d+", part) for part in (match["start"], match["end"], match["step"])
    )
    kind = match["kind"] or "+"
    if step is None:
        if not whole:
            raise InputError(f"range {text!r} needs a step, e.g. '{match['start']}..{match['end']} +0.1'")
        step = Decimal(1)
    if end < start:
        raise InputError(f"range {text!r} ends before it starts")
    if kind == "+" and step <= 0:
        raise InputError(f"range step must be positive, got {match['step']!r} in {text!r}")
    if kind in "x*" and (step <= 1 or start <= 0):
        raise InputError(f"a 'x' range needs a start above 0 and a factor above 1, got {text!r}")
    values: list[Decimal] = []
    value = start
    while value <= end:
        values.append(value)
        if len(values) > MAX_SWEEP_POINTS:
            raise InputError(f"range {text!r} has more than {MAX_SWEEP_POINTS} values")
        value = value + step if kind == "+" else value * step
    if whole:
        return [int(v) for v in values]
    return [float(v) for v in values]


def _sweep_values(where: _Where, key: str, raw: Any) -> list[tuple[Any, tuple[Any, ...]]]:
    """``[(value, path of the item that gave it), ...]`` for one sweep entry, without repeats."""
    items = raw if isinstance(raw, list) else [raw]
    if not items:
        raise where.error(("sweep", key), "empty list: give the values to sweep")
    out: list[tuple[Any, tuple[Any, ...]]] = []
    seen: list[Any] = []
    for i, item in enumerate(items):
        path = ("sweep", key, i) if isinstance(raw, list) else ("sweep", key)
        if isinstance(item, str) and ".." in item:
            try:
                values: list[Any] = list(parse_sweep_range(item))
            except InputError as err:
                raise where.error(path, err.message) from None
        elif item is None or isinstance(item, (Mapping, list, tuple)):
            raise where.error(path, f"expected a value or a range such as '0.05..0.2 +0.05', got {item!r}")
        else:
            values = [item]
        for value in values:
            if not any(value == old and type(value) is type(old) for old in seen):
                seen.append(value)
                out.append((value, path))
    return out


def _parse_sweep(
    where: _Where, raw: Any, costs: Mapping[str, Any], model: str | None
) -> tuple[tuple[str, tuple[Any, ...]], ...]:
    """Check ``sweep:``; every value, and every combination, is checked by ``model``."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise where.error(
            ("sweep",),
            f"expected {_EXPECT['sweep']}, e.g. {{hop_latency_us: [0.2, 0.3], poll_period_us: '0.05..0.2 +0.05'}}, "
            f"got {raw!r}",
        )
    out: list[tuple[str, tuple[Any, ...]]] = []
    points = 1
    for key, value in raw.items():
        if not isinstance(key, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)*", key):
            raise where.error(("sweep", key), f"a sweep key is a cost parameter name (a.b for a table entry), got {key!r}")
        if key in COLUMNS:
            raise where.error(("sweep", key), f"{key!r} is a results column, not a cost parameter")
        values = _sweep_values(where, key, value)
        for item, path in values:
            trial = copy.deepcopy(dict(costs))
            apply_cost(trial, key, item)
            try:
                validate_costs(model, trial)
            except InputError as err:
                at = ("sweep", key) if err.choices and "unknown" in err.message else path
                raise where.error(at, err.message, err.choices) from None
        out.append((key, tuple(v for v, _ in values)))
        points *= len(values)
        if points > MAX_SWEEP_POINTS:
            raise where.error(("sweep",), f"the sweep has more than {MAX_SWEEP_POINTS} combinations")
    sweep = tuple(out)
    _check_points(costs, sweep, model, lambda message: where.error(("sweep",), message))
    return sweep


def _check_points(
    costs: Mapping[str, Any],
    sweep: tuple[tuple[str, tuple[Any, ...]], ...],
    model: str | None,
    error: Callable[[str], InputError],
) -> None:
    """Check ``costs`` with every sweep combination applied (just ``costs`` without a sweep)."""
    keys = [key for key, _ in sweep]
    for values in itertools.product(*(vals for _, vals in sweep)):
        trial = copy.deepcopy(dict(costs))
        for key, value in zip(keys, values):
            apply_cost(trial, key, value)
        try:
            validate_costs(model, trial)
        except InputError as err:
            point = ", ".join(f"{k}={v!r}" for k, v in zip(keys, values))
            message = f"{err.field}: {err.message}" if err.field else err.message
            raise error(f"with {point}: {message}" if point else message) from None


def check_costs(scenario: Scenario, model: str | None) -> None:
    """Check a loaded scenario's ``costs`` and every sweep combination against ``model``.

    For a scenario checked when loaded for another model (``--model`` given
    with a :class:`Scenario` object).
    """
    if not scenario.costs and not scenario.sweep:
        return
    if not scenario.sweep:
        try:
            validate_costs(model, scenario.costs)
        except InputError as err:
            raise InputError(err.message, file=scenario.source, field=err.field, choices=err.choices) from None
        return
    _check_points(
        scenario.costs,
        scenario.sweep,
        model,
        lambda message: InputError(message, file=scenario.source, field="sweep"),
    )
