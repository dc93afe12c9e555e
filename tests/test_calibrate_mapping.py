"""Measured rows to modelled configurations: the NCCL tuner rule and the unmapped families."""
from __future__ import annotations

import pytest

from collsim.calibrate.mapping import (gpu_model, known_algorithm, known_protocol, map_measurements, map_row,
                                      nccl_default_choice)


def row(**kw):
    base = {"collective": "allreduce", "gpu": "H100", "ranks": 8, "library": "NCCL (nccl-tests all_reduce_perf)",
            "algorithm": "", "protocol": "", "launch": "eager", "size_bytes": 4096, "time_us": 20.0, "notes": "",
            "origin": "S99 https://example.org", "source": "m.csv", "wrong": False}
    base.update(kw)
    return base


def test_nccl_tuner_rule_on_8_h100():
    assert nccl_default_choice("hgx-h100", 8, 4096)[:2] == ("ring", "ll")
    assert nccl_default_choice("hgx-h100", 8, 512 * 1024)[:2] == ("ring", "ll")
    # NCCL's own formula puts the Ring/LL -> NVLS switch near 1 MiB (S02 reports it between 1 and 2 MiB)
    assert nccl_default_choice("hgx-h100", 8, 2 << 20)[:2] == ("nvls", "simple")
    # restricted to ring (NCCL_ALGO=Ring): the protocol moves to LL128 / Simple as the size grows
    assert nccl_default_choice("hgx-h100", 8, 64 << 20, ("ring",))[:2] in (("ring", "ll128"), ("ring", "simple"))
    # no NVLS before Hopper
    algo, proto, times = nccl_default_choice("dgx-a100", 8, 64 << 20)
    assert algo == "ring" and "nvls/simple" not in times


def test_default_rows_map_by_the_tuner_rule():
    m = map_row(row())
    assert m.mapped and (m.topology, m.ranks, m.algorithm, m.protocol, m.launch) == ("hgx-h100", 8, "ring", "ll", "eager")
    assert "NCCL default" in m.rule
    big = map_row(row(size_bytes=8 << 20))  # the tuner picks NVLS: a multimem reduce-scatter and all-gather
    assert big.mapped and (big.algorithm, big.protocol) == ("two-shot", "nvls") and "NVLS" in big.rule


def test_stated_algorithm_and_protocol_are_used():
    m = map_row(row(algorithm="ring", protocol="simple", size_bytes=1024))
    assert m.mapped and (m.algorithm, m.protocol) == ("ring", "simple")
    m = map_row(row(algorithm="Ring (NCCL_ALGO=Ring)", size_bytes=64 << 20))
    assert m.mapped and m.algorithm == "ring" and m.protocol in ("ll128", "simple")


@pytest.mark.parametrize("kw, algorithm", [
    ({"algorithm": "NVLS (NCCL_ALGO=NVLS forced)"}, "two-shot"),
    ({"algorithm": "NVLSTree (NCCL_ALGO=NVLSTree)"}, "two-shot"),
    ({"library": "PyTorch symmetric memory", "algorithm": "multimem_all_reduce_"}, "two-shot"),
    ({"library": "Triton + symmetric memory", "algorithm": "multimem (NVLS) one-shot"}, "one-shot"),
])
def test_nvls_rows_map_to_the_nvls_protocol(kw, algorithm):
    m = map_row(row(**kw))
    assert m.mapped and (m.topology, m.algorithm, m.protocol) == ("hgx-h100", algorithm, "nvls"), m.reason
    assert known_algorithm(row(**kw)) == algorithm and known_protocol(row(**kw)) == "nvls"


@pytest.mark.parametrize("kw, reason", [
    ({"gpu": "A100", "algorithm": "NVLS (NCCL_ALGO=NVLS forced)"}, "do not multicast"),
    ({"gpu": "A100", "algorithm": "NCCL_ALGO=NVLS requested (what NCCL actually ran is not reported)"},
     "not reported"),
    ({"library": "Triton-distributed", "algorithm": "allreduce_double_tree"}, "tree algorithms"),
    ({"library": "MSCCL++ (mscclpp-test allreduce)", "algorithm": "mscclpp-test allreduce kernel 6"}, "MSCCL++"),
    ({"notes": "timing: host wall clock over 5000 back-to-back calls"}, "host wall-clock"),
    ({"launch": "graph", "notes": "timing: CUDA graph of 10 back-to-back allreduces"}, "pipelined throughput"),
    ({"nodes": 2}, "multi-node"),
    ({"ranks": None}, "GPU count not stated"),
    ({"gpu": "H800"}, "no topology preset for H800"),
    ({"gpu": "H100 PCIe"}, "PCIe system"),
    ({"ranks": 16}, "exceed hgx-h100's 8 GPUs"),
    ({"wrong": True}, "data check failed"),
    ({"collective": "allgather"}, "collsim models AllReduce"),
    ({"notes": "2MB value is an outlier as published"}, "outlier"),
])
def test_unmapped_families_say_why(kw, reason):
    m = map_row(row(**kw))
    assert not m.mapped
    assert reason in m.reason


def test_symmetric_memory_kernels_and_hidden_launch():
    notes = "timing: kraken benchmark_with_event, ops queued behind a 20 ms GPU sleep (launch overhead hidden)"
    m = map_row(row(library="PyTorch symmetric memory", algorithm="one_shot_all_reduce", notes=notes))
    assert m.mapped and (m.algorithm, m.protocol, m.launch) == ("one-shot", "barrier", "graph")
    m = map_row(row(library="PyTorch symmetric memory", algorithm="two_shot_all_reduce_", notes=notes))
    assert (m.algorithm, m.protocol) == ("two-shot", "barrier")


def test_substitution_is_recorded():
    m = map_row(row(gpu="H20"))
    assert m.mapped and m.topology == "hgx-h100" and "H20 costed as H100" in m.substitution


def test_gpu_names():
    assert gpu_model("NVIDIA H100 80GB HBM3") == ("H100", False)
    assert gpu_model("H100 (presumed)") == ("H100", True)
    assert gpu_model("GB200 (B200-class)")[0] == "GB200"
    assert gpu_model("B200")[0] == "B200" and gpu_model("H200")[0] == "H200" and gpu_model("H20")[0] == "H20"
    assert gpu_model("A100-SXM4-80GB")[0] == "A100" and gpu_model("")[0] == ""


def test_topology_option_fills_rows_without_gpu():
    import pandas as pd

    table = pd.DataFrame([row(gpu="", algorithm="ring", protocol="ll")])
    assert map_measurements(table)["reason"].iloc[0].startswith("GPU not stated")
    out = map_measurements(table, topology="hgx-h200")
    assert out["mapped"].iloc[0] and out["m_topology"].iloc[0] == "hgx-h200"
    assert out["measured_us"].iloc[0] == 20.0
