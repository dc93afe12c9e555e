"""Custom topologies (explicit and shorthand), input errors, YAML line tracking, data-file sources."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from collsim.errors import InputError
from collsim.topology import build_topology, list_presets, load_topology
from collsim.topology.catalog import data_dir
from collsim.yamlsource import Locator, field_name, load_yaml_with_lines


def write(tmp_path: Path, text: str, name: str = "topo.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return path


def error_of(spec, **kwargs) -> InputError:
    with pytest.raises(InputError) as info:
        load_topology(spec, **kwargs)
    return info.value


EXPLICIT = """
name: two-boxes
gpu: H100
nodes:
  - {id: a0, kind: gpu}
  - {id: a1, kind: gpu}
  - {id: b0, kind: gpu, model: A100}
  - {id: sw, kind: nvswitch, traversal_latency_us: 0.2}
  - {id: cpu, kind: cpu}
edges:
  - {between: [a0, sw], link_type: nvlink4, count: 18}
  - {between: [a1, sw], link_type: nvlink4, count: 18}
  - {between: [a0, a1], link_type: nvlink4, count: 2, latency_us: 0.6}
  - {between: [b0, cpu], link_type: pcie4, bandwidth_gbps: 30, effective_gbps: 20}
  - {between: [a0, cpu], link_type: pcie5}
  - {between: [a1, cpu], link_type: pcie5}
"""


# ------------------------------------------------------------------ custom topologies

def test_explicit_yaml_file(tmp_path):
    topo = load_topology(write(tmp_path, EXPLICIT))
    assert topo.name == "two-boxes" and topo.num_gpus == 3
    assert [topo.gpu_node(r) for r in range(3)] == ["a0", "a1", "b0"]
    assert topo.gpu_info(2)["model"] == "A100" and topo.generation(0) == "hopper"
    # A single switch chip needs no aggregation: routes use it directly; the
    # direct 2-link edge is fewer hops, so it wins over the switch.
    assert topo.route(0, 1).path == ["a0", "a1"] and topo.route(0, 1).via == "direct"
    assert topo.directed_link_capacity("b0", "cpu") == (30.0, 20.0)
    pcie = topo.route(2, 0)
    assert pcie.path == ["b0", "cpu", "a0"] and pcie.via == "pcie-host"
    assert pcie.bottleneck_gbps == 30.0 and not pcie.nvlink_only


def test_explicit_accepts_a_string_path_and_a_dict(tmp_path):
    path = write(tmp_path, EXPLICIT)
    from_str = load_topology(str(path))
    from_dict = load_topology(yaml.safe_load(path.read_text()))
    assert from_str.summary() == from_dict.summary()


def test_gpu_forwarding_is_nvlink_gpu_to_gpu_only():
    # a - b over NVLink; b - c only over a PCIe switch: c is reachable from b
    # but a may not reach c by entering b over NVLink and leaving over PCIe.
    spec = {
        "gpu": "H100",
        "nodes": [{"id": "a", "kind": "gpu"}, {"id": "b", "kind": "gpu"}, {"id": "c", "kind": "gpu"},
                  {"id": "p", "kind": "pcie-switch"}],
        "edges": [{"between": ["a", "b"], "link_type": "nvlink4"},
                  {"between": ["b", "p"], "link_type": "pcie5"},
                  {"between": ["c", "p"], "link_type": "pcie5"}],
    }
    err = error_of(spec)
    assert err.message == "gpu 2 is unreachable from gpu 0"
    assert err.field == "nodes[2]"


def test_custom_gpu_model_with_all_fields():
    spec = {
        "nodes": [{"id": "g0", "kind": "gpu", "model": "X1", "generation": "future", "sm": 120,
                   "hbm_gbps": 9000, "sm_count": 160},
                  {"id": "g1", "kind": "gpu", "model": "H100", "hbm_gbps": 4000}],
        "edges": [{"between": ["g0", "g1"], "link_type": "nvlink5"}],
    }
    topo = load_topology(spec)
    assert topo.gpu_info(0) == {"model": "X1", "generation": "future", "sm": 120, "hbm_gbps": 9000.0,
                                "sm_count": 160}
    assert topo.gpu_info(1)["hbm_gbps"] == 4000.0 and topo.gpu_info(1)["sm"] == 90


def test_shorthand_switch_like_astra_sim(tmp_path):
    path = write(tmp_path, """
        gpu: H100
        topology: [Switch]
        npus_count: [8]
        bandwidth: [400.0]
        latency: [936.25]
    """)
    topo = load_topology(path)
    assert topo.name == "topo" and topo.num_gpus == 8
    route = topo.route(0, 7)
    assert route.via == "nvswitch" and route.bottleneck_gbps == 400.0
    assert route.effective_gbps == pytest.approx(400.0 * 20.6 / 25.0)  # nvlink4's calibrated ratio
    # latency is in ns per link, like ASTRA-sim: 2 links + 0.1 us switch traversal
    assert route.latency_us == pytest.approx(2 * 0.93625 + 0.1)


def test_shorthand_with_chips_matches_the_hgx_preset():
    spec = {"name": "my-hgx", "gpu": "H100", "topology": ["switch"], "npus": [8], "links": [18],
            "switch_chips": [4], "links_per_chip": [[5, 5, 4, 4]]}
    mine, preset = load_topology(spec).summary(), load_topology("hgx-h100").summary()
    for key in ("links_per_gpu", "per_gpu_gbps", "switches", "path_types"):
        assert mine[key] == preset[key]


def test_shorthand_two_dimensions_switch_by_ring():
    topo = load_topology({"gpu": "B200", "topology": ["switch", "ring"], "npus": [4, 4],
                          "bandwidth": [800, 100], "latency_us": [0.3, 1.0]})
    assert topo.num_gpus == 16
    assert topo.summary()["switches"] == {"nvswitch": 4}   # one per group of 4
    inside = topo.route(0, 3)                               # same switch group
    assert inside.via == "nvswitch" and inside.bottleneck_gbps == 800.0
    neighbour = topo.route(0, 4)                            # ring neighbour in dimension 1
    assert neighbour.via == "direct" and neighbour.bottleneck_gbps == 100.0
    far = topo.route(0, 8)                                  # two ring hops, forwarded by gpu4 or gpu12
    assert far.hops == 2 and far.via == "peer-gpu"


def test_shorthand_fully_connected_and_pcie_link_type():
    topo = load_topology({"gpu": "A100-PCIe", "topology": ["fully_connected"], "npus": [4],
                          "link_type": ["pcie4"]})
    assert topo.summary()["links_per_gpu"] == {"pcie4": 3}
    assert topo.route(1, 3).via == "direct" and not topo.route(1, 3).nvlink_only


def test_inline_topology_errors_point_into_the_enclosing_file():
    text = "name: scenario\ntopology:\n  gpu: H100\n  nodes:\n    - {id: g0, kind: gpu}\n    - {id: s, kind: nvswich}\n"
    data, line_of = load_yaml_with_lines(text, "scenario.yaml")
    err = error_of(data["topology"], locator=Locator("scenario.yaml", line_of, ("topology",)))
    assert (err.file, err.line, err.field) == ("scenario.yaml", 6, "topology.nodes[1].kind")
    preset_err = error_of("hgx-h1OO", locator=Locator("scenario.yaml", line_of, ("topology",)))
    assert (preset_err.file, preset_err.line, preset_err.field) == ("scenario.yaml", 2, "topology")


# ------------------------------------------------------------------ input errors

def test_unknown_preset_lists_presets():
    err = error_of("hgx-h1000")
    assert "unknown topology preset 'hgx-h1000'" in err.message
    assert err.choices == list_presets()


def test_missing_file():
    err = error_of("no/such/topology.yaml")
    assert err.message == "file not found" and err.file == "no/such/topology.yaml"


BAD_FILES = {
    "unknown node kind": (
        """
        gpu: H100
        nodes:
          - {id: g0, kind: gpu}
          - {id: s0, kind: nvswich}
        """, 4, "nodes[1].kind", "unknown node kind 'nvswich'"),
    "unknown link type": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - between: [g0, g1]
            link_type: nvlink9
        """, 5, "edges[0].link_type", "unknown link type 'nvlink9'"),
    "missing field": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - between: [g0, g1]
            count: 2
        """, 4, "edges[0].link_type", "missing field 'link_type'"),
    "unreachable gpu": (
        """
        gpu: H100
        nodes:
          - {id: g0, kind: gpu}
          - {id: g1, kind: gpu}
          - {id: g2, kind: gpu}
        edges:
          - {between: [g0, g1], link_type: nvlink4}
        """, 5, "nodes[2]", "gpu 2 is unreachable from gpu 0"),
    "non-positive bandwidth": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - {between: [g0, g1], link_type: nvlink4, bandwidth_gbps: 0}
        """, 4, "edges[0].bandwidth_gbps", "must be positive"),
    "non-positive shorthand bandwidth": (
        """
        gpu: H100
        topology: [switch]
        npus: [8]
        bandwidth: [-5]
        """, 4, "bandwidth[0]", "must be positive"),
    "unknown gpu model": (
        """
        gpu: H1000
        topology: [switch]
        npus: [8]
        """, 1, "gpu", "unknown GPU model 'H1000'"),
    "unknown node in edge": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - {between: [g0, g7], link_type: nvlink4}
        """, 4, "edges[0].between[1]", "unknown node 'g7'"),
    "duplicate edge": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - {between: [g0, g1], link_type: nvlink4}
          - {between: [g1, g0], link_type: nvlink4}
        """, 5, "edges[1].between", "second edge between"),
    "efficiency above one": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: g1, kind: gpu}]
        edges:
          - {between: [g0, g1], link_type: nvlink4, efficiency: 1.5}
        """, 4, "edges[0].efficiency", "must be in (0, 1]"),
    "cpu link without bandwidth": (
        """
        gpu: H100
        nodes: [{id: g0, kind: gpu}, {id: c0, kind: cpu}, {id: c1, kind: cpu}, {id: g1, kind: gpu}]
        edges:
          - {between: [g0, c0], link_type: pcie5}
          - {between: [c0, c1], link_type: cpu-interconnect}
          - {between: [g1, c1], link_type: pcie5}
        """, 5, "edges[1].bandwidth_gbps", "has no default bandwidth"),
    "unknown top-level key": (
        """
        gpu: H100
        topology: [switch]
        npus: [8]
        bandwith: [100]
        """, 4, "bandwith", "unknown key 'bandwith'"),
    "per-dimension length": (
        """
        gpu: H100
        topology: [switch, ring]
        npus: [8]
        """, 3, "npus", "has 1 entries but topology has 2 dimension(s)"),
    "uneven chip split": (
        """
        gpu: H100
        topology: [switch]
        npus: [8]
        links: [18]
        switch_chips: [4]
        """, 4, "links[0]", "do not split evenly"),
    "duplicate rank": (
        """
        gpu: H100
        nodes:
          - {id: g0, kind: gpu, rank: 0}
          - {id: g1, kind: gpu, rank: 0}
        edges: [{between: [g0, g1], link_type: nvlink4}]
        """, 4, "nodes[1]", "gpu rank 0 is used by both"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_files_raise_located_input_errors(tmp_path, case):
    text, line, field, message = BAD_FILES[case]
    path = write(tmp_path, text, "bad.yaml")
    err = error_of(path)
    assert message in err.message
    assert (err.file, err.line, err.field) == (str(path), line, field)
    assert str(err).startswith(f"{path}:{line}: {field}: ")


def test_unknown_node_kind_and_link_type_list_choices(tmp_path):
    kind = error_of(write(tmp_path, BAD_FILES["unknown node kind"][0], "a.yaml"))
    assert kind.choices == ["gpu", "nvswitch", "pcie-switch", "cpu"]
    link = error_of(write(tmp_path, BAD_FILES["unknown link type"][0], "b.yaml"))
    assert "nvlink4" in link.choices and "pcie5" in link.choices


def test_malformed_yaml_reports_its_line(tmp_path):
    err = error_of(write(tmp_path, "gpu: H100\nnodes:\n  - id: g0\n     kind: gpu\n", "broken.yaml"))
    assert err.message.startswith("malformed YAML") and err.line == 4


def test_not_a_mapping():
    with pytest.raises(InputError, match="a topology must be a mapping"):
        build_topology(["switch"])  # type: ignore[arg-type]
    with pytest.raises(InputError, match="preset name, a file path or a mapping"):
        load_topology(42)


# ------------------------------------------------------------------ YAML line tracking

def test_load_yaml_with_lines_paths_and_fallbacks(tmp_path):
    path = write(tmp_path, """
        run:
          sizes: [1, 2]
          topology:
            nodes:
              - id: a
                kind: gpu
        other: 3
    """, "doc.yaml")
    data, line_of = load_yaml_with_lines(path)
    assert data["run"]["topology"]["nodes"][0]["kind"] == "gpu"
    assert line_of(()) == 1
    assert line_of(("run", "sizes")) == 2
    assert line_of(("run", "topology", "nodes", 0)) == 5
    assert line_of(("run", "topology", "nodes", 0, "kind")) == 6
    assert line_of(("run", "topology", "nodes", 0, "model")) == 5   # missing: its parent
    assert line_of(("other",)) == 7
    assert line_of(("nope", "deeper")) == 1


def test_load_yaml_with_lines_text_empty_and_errors(tmp_path):
    data, line_of = load_yaml_with_lines("a: 1\n", "inline.yaml")
    assert data == {"a": 1} and line_of(("a",)) == 1
    assert load_yaml_with_lines("", "empty.yaml")[0] is None
    with pytest.raises(InputError) as info:
        load_yaml_with_lines("a: 1\nb:\n  c: 1\n  c: 2\n", "dup.yaml")
    assert (info.value.line, info.value.field) == (4, "b.c")
    with pytest.raises(InputError, match="file not found"):
        load_yaml_with_lines(tmp_path / "missing.yaml")


def test_merge_keys_are_indexed():
    data, line_of = load_yaml_with_lines("base: &b\n  count: 2\nedge:\n  <<: *b\n  link_type: nvlink4\n", "m.yaml")
    assert data["edge"] == {"count": 2, "link_type": "nvlink4"}
    assert line_of(("edge", "link_type")) == 5


def test_field_name():
    assert field_name(("topology", "edges", 2, "between", 1)) == "topology.edges[2].between[1]"


# ------------------------------------------------------------------ data files name their sources

NUMERIC_SHORTHAND_KEYS = {"npus", "npus_count", "links", "switch_chips", "links_per_chip", "bandwidth",
                          "latency", "latency_us", "efficiency", "switch_latency_us"}
NUMERIC_ITEM_KEYS = {"count", "bandwidth_gbps", "effective_gbps", "efficiency", "latency_us",
                     "traversal_latency_us"}


@pytest.mark.parametrize("name", list_presets())
def test_every_number_in_a_preset_names_its_source(name):
    data = yaml.safe_load((data_dir() / f"{name}.yaml").read_text())
    assert data["name"] == name and data["description"]
    sources = data["sources"]
    used = {key for key in data if key in NUMERIC_SHORTHAND_KEYS}
    for item in data.get("nodes", []) + data.get("edges", []):
        used |= {key for key in item if key in NUMERIC_ITEM_KEYS}
    missing = sorted(key for key in used if not str(sources.get(key, "")).strip())
    assert not missing, f"{name}: numbers without a source: {missing}"


def test_every_number_in_the_catalogs_names_its_source():
    gpus = yaml.safe_load((data_dir() / "_gpus.yaml").read_text())["gpus"]
    for model, entry in gpus.items():
        for key in ("sm", "sm_count", "hbm_gbps"):
            assert entry["sources"][key].strip(), (model, key)
    links = yaml.safe_load((data_dir() / "_links.yaml").read_text())
    for link_type, entry in links["link_types"].items():
        for key in ("bandwidth_gbps", "effective_gbps", "latency_us"):
            if entry[key] is not None:
                assert entry["sources"][key].strip(), (link_type, key)
    for kind in links["traversal_latency_us"]:
        assert links["sources"][kind].strip(), kind
