"""``collsim topologies`` (list presets) and ``collsim topology show NAME_OR_FILE``."""
from __future__ import annotations

import json
from typing import Any

import typer

from collsim.cli.app import app

__all__ = ["topology_app", "topologies", "show", "list_cmd"]

topology_app = typer.Typer(
    help="Inspect GPU topologies: presets and custom YAML files.",
    no_args_is_help=True,
    add_completion=False,
)
app.add_typer(topology_app, name="topology")


def _console() -> Any:
    from rich.console import Console

    console = Console(markup=False)
    if not console.is_terminal:
        # Piped or captured: keep wide tables on one line each.
        console = Console(width=200, no_color=True, highlight=False, markup=False)
    return console


def _presets_table() -> Any:
    from rich import box
    from rich.table import Table

    from collsim.topology import list_presets, load_topology  # lazy: start-up

    table = Table(title="Topology presets", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
    for column, justify in (("name", "left"), ("GPUs", "right"), ("GPU model", "left"),
                            ("GB/s per GPU (nominal/effective)", "right"), ("interconnect", "left")):
        table.add_column(column, justify=justify)
    for name in list_presets():
        topo = load_topology(name)
        info = topo.gpu_info(0)
        egress = f"{topo.gpu_egress_gbps(0):g} / {topo.gpu_egress_gbps(0, effective=True):g}"
        summary = topo.summary(routes=False)
        table.add_row(name, str(topo.num_gpus), info["model"], egress, summary["interconnect"])
    return table


@app.command("topologies")
def topologies() -> None:
    """List the topology presets (name, GPUs, GPU model, interconnect)."""
    _console().print(_presets_table())


@topology_app.command("list")
def list_cmd() -> None:
    """List the topology presets (same as ``collsim topologies``)."""
    _console().print(_presets_table())


def _format(value: Any) -> str:
    if isinstance(value, dict) and set(value) == {"nominal", "effective"}:
        return f"{_format(value['nominal'])} (effective {_format(value['effective'])})"
    if isinstance(value, dict):
        separator = "; " if any(isinstance(v, dict) for v in value.values()) else ", "
        return separator.join(f"{k}: {_format(v)}" for k, v in value.items()) or "-"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list):
        return "-".join(_format(v) for v in value)
    return str(value)


@topology_app.command("show")
def show(
    name_or_file: str = typer.Argument(..., metavar="NAME_OR_FILE", help="Preset name or topology YAML file."),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON."),
    routes: bool = typer.Option(False, "--routes", help="Also list the route of every GPU pair."),
    sources: bool = typer.Option(False, "--sources", help="Also list where the numbers come from."),
) -> None:
    """Print the summary of a preset or a topology file."""
    from rich import box
    from rich.table import Table

    from collsim.topology import load_topology  # lazy: start-up

    topo = load_topology(name_or_file)
    summary = topo.summary()
    if as_json:
        payload = dict(summary)
        if routes:
            payload["routes"] = [
                {"src": r.src, "dst": r.dst, "path": r.path, "via": r.via, "hops": r.hops,
                 "bottleneck_gbps": r.bottleneck_gbps, "effective_gbps": r.effective_gbps,
                 "latency_us": r.latency_us}
                for r in topo.routes()
            ]
        if sources:
            payload["sources"] = topo.sources
        typer.echo(json.dumps(payload, indent=2, default=str))
        return

    console = _console()
    facts = Table(title=f"Topology {summary['name']}", box=box.SIMPLE_HEAD, show_header=False,
                  title_justify="left", pad_edge=False)
    facts.add_column("field")
    facts.add_column("value")
    labels = {
        "description": "description",
        "gpus": "GPUs",
        "gpu_model": "GPU model",
        "generation": "generation",
        "links_per_gpu": "links per GPU",
        "per_link_gbps": "per link GB/s/dir",
        "per_gpu_gbps": "per GPU GB/s/dir",
        "per_gpu_gbps_by_family": "per GPU by family",
        "switches": "switch chips",
        "cpus": "CPU sockets",
        "path_types": "path types (GPU pairs)",
        "route_hops": "hops (GPU pairs)",
        "routing": "routing model",
    }
    for key, label in labels.items():
        facts.add_row(label, _format(summary[key]))
    info = topo.gpu_info(0)
    facts.add_row("GPU properties", f"sm {info['sm']}, {info['sm_count']} SMs, HBM {info['hbm_gbps']:g} GB/s")
    console.print(facts)

    if routes:
        table = Table(title="Routes", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        for column in ("src", "dst", "via", "hops", "GB/s nominal", "GB/s effective", "latency us", "path"):
            table.add_column(column)
        for r in topo.routes():
            table.add_row(str(r.src), str(r.dst), r.via, str(r.hops), f"{r.bottleneck_gbps:g}",
                          f"{r.effective_gbps:g}", f"{r.latency_us:g}", " > ".join(map(str, r.path)))
        console.print(table)
    if sources and topo.sources:
        table = Table(title="Sources", box=box.SIMPLE_HEAD, title_justify="left", pad_edge=False)
        table.add_column("field")
        table.add_column("source")
        for key, text in topo.sources.items():
            table.add_row(str(key), " ".join(str(text).split()))
        console.print(table)
