"""collsim calibrate: the fit recovers known values, identifiability refusals, profiles, bad input."""
from __future__ import annotations

import pandas as pd
import pytest

from collsim.calibrate.evaluate import Evaluator, configs_of
from collsim.calibrate.fit import calibrate
from collsim.calibrate.identify import IdentifiabilityError, identifiability
from collsim.calibrate.parameters import costs_from_values, resolve_params
from collsim.calibrate.profile import load_profile, profile_document, read_profile, write_profile
from collsim.errors import InputError


def synthetic(model: str, truth: dict[str, float], *, ranks=(2, 4, 8), launches=("eager", "graph"),
              configs=(("ring", "ll"),), sizes=(1024, 65536, 1 << 20, 8 << 20), topology="hgx-h100") -> pd.DataFrame:
    """Mapped rows whose 'measurements' are the model's own latencies with ``truth`` as costs."""
    rows = []
    for n in ranks:
        for launch in launches:
            for algorithm, protocol in configs:
                for size in sizes:
                    rows.append(dict(m_topology=topology, m_ranks=n, m_algorithm=algorithm, m_protocol=protocol,
                                     m_launch=launch, size_bytes=size, dtype="float32",
                                     family=f"{algorithm}/{protocol}/{n}/{launch}",
                                     family_label=f"{algorithm}/{protocol} x{n} {launch}"))
    df = pd.DataFrame(rows)
    ev = Evaluator(model)
    df["measured_us"] = ev.latencies(configs_of(df), costs_from_values(model, truth))
    return df


ANALYTIC_TRUTH = {"launch_overhead_us": 6.0, "hw_latency_us.nvlink.ll": 0.9, "base_latency_us.ll": 4.0}


def test_fit_recovers_known_analytic_values_with_cross_validation():
    data = synthetic("analytic", ANALYTIC_TRUTH)
    cal = calibrate(data, ["launch", "hw_latency_us.nvlink.ll", "base_latency_us.ll"], model="analytic", folds=3)
    for name, value in ANALYTIC_TRUTH.items():
        assert cal.values[name] == pytest.approx(value, rel=1e-5), name
    assert cal.default_errors["median_abs_pct"] > 3.0  # the documented values are off ...
    assert cal.fitted_errors["max_abs_pct"] < 1e-3  # ... the fitted ones reproduce the data
    assert len(cal.folds) == 3
    for fold in cal.folds:
        assert fold.heldout_after["max_abs_pct"] < 1e-3 < fold.heldout_before["median_abs_pct"]
        assert fold.train_rows + fold.heldout_rows == len(data)
    assert cal.heldout_fitted["max_abs_pct"] < 1e-3
    assert cal.rows["heldout_us"].notna().all()


def test_fit_recovers_known_des_values():
    truth = {"fence_sys_us": 1.3, "kernel_start_us": 2.0, "poll_period_us": 0.3}
    data = synthetic("des", truth, ranks=(2, 4), launches=("graph",),
                     configs=(("one-shot", "barrier"), ("one-shot", "ll"), ("two-shot", "barrier"),
                              ("two-shot", "ll")), sizes=(256, 4096, 262144))
    cal = calibrate(data, ["fence", "start", "poll"], model="des", folds=0)
    for name, value in truth.items():
        assert cal.values[name] == pytest.approx(value, rel=1e-4), name
    assert cal.fitted_errors["max_abs_pct"] < 1e-3
    assert all(factor < 1.001 for factor in cal.uncertainty.values())  # exact data: no spread


def test_refuses_a_protocol_cost_the_data_never_used():
    data = synthetic("analytic", ANALYTIC_TRUTH)
    with pytest.raises(IdentifiabilityError) as err:
        calibrate(data, ["launch", "hw_latency_us.nvlink.ll128"], model="analytic", folds=0)
    text = str(err.value)
    assert "hw_latency_us.nvlink.ll128" in text and "no LL128-family rows" in text
    assert "--params launch_overhead_us" in text and "\n" not in text


def test_refuses_collinear_parameters():
    # eager launches at one rank count: launch overhead, base latency and per-step latency all add a constant
    data = synthetic("analytic", ANALYTIC_TRUTH, ranks=(8,), launches=("eager",))
    with pytest.raises(IdentifiabilityError, match=r"collinear with launch_overhead_us"):
        calibrate(data, ["launch", "base_latency_us.ll"], model="analytic", folds=0)


def test_refuses_launch_overhead_without_eager_rows():
    data = synthetic("analytic", ANALYTIC_TRUTH, launches=("graph",))
    with pytest.raises(IdentifiabilityError, match="no row is an eager launch"):
        calibrate(data, ["launch", "base_latency_us.ll"], model="analytic", folds=0)


def test_group_members_the_data_cannot_identify_are_listed_not_fitted():
    data = synthetic("analytic", ANALYTIC_TRUTH)
    cal = calibrate(data, ["hw_latency_us", "launch"], model="analytic", folds=0)
    assert set(cal.values) == {"hw_latency_us.nvlink.ll", "launch_overhead_us"}
    assert "no LL128-family rows" in cal.refused["hw_latency_us.nvlink.ll128"]
    assert "leaves NVLink" in cal.refused["hw_latency_us.pci.ll"]


def test_identifiability_on_a_hand_made_jacobian():
    import numpy as np

    jac = np.array([[1.0, 2.0, 0.0, 1.0], [2.0, 4.0, 0.0, 0.5], [3.0, 6.0, 0.0, 0.1]])
    refused = identifiability(jac, ["a", "b", "c", "d"])
    assert set(refused) == {"b", "c"}
    assert "collinear with a" in refused["b"] and "zero Jacobian column" in refused["c"]


def test_a_zero_column_names_the_protocol_family_the_rows_lack():
    """The family in the reason is each row protocol's declared analytic_family (sentinel is LL-family)."""
    import numpy as np

    jac = np.array([[1.0, 0.0], [0.5, 0.0], [0.2, 0.0]])
    names = ["launch_overhead_us", "hw_latency_us.nvlink.ll128"]
    rows = synthetic("analytic", {}, ranks=(8,), launches=("eager",), configs=(("one-shot", "sentinel"),),
                     sizes=(1024, 4096, 8192))
    refused = identifiability(jac, names, configs_of(rows))
    assert refused == {"hw_latency_us.nvlink.ll128": "the data has no LL128-family rows: zero Jacobian column"}
    rows = synthetic("analytic", {}, ranks=(8,), launches=("eager",), configs=(("one-shot", "atomic-counter"),),
                     sizes=(1024, 4096, 8192))
    refused = identifiability(jac, names, configs_of(rows))
    assert refused == {"hw_latency_us.nvlink.ll128": "no row's modelled latency depends on it: zero Jacobian column"}


def test_worker_processes_cost_what_this_process_costs():
    rows = synthetic("analytic", {}, ranks=(2, 4, 8), launches=("eager",), configs=(("ring", "ll"), ("one-shot", "ll")))
    cfgs = configs_of(rows)
    costs = costs_from_values("analytic", {"launch_overhead_us": 3.0})
    here = Evaluator("analytic").latencies(cfgs, costs)
    with Evaluator("analytic", jobs=2) as ev:
        there = ev.latencies(cfgs, costs)
        assert ev.calls == len(cfgs) and ev._executor is not None and ev._executor.workers == 2
    assert list(there) == list(here)


def test_unknown_whole_number_and_empty_parameter_names():
    with pytest.raises(InputError) as err:
        resolve_params("des", ["launch", "warp_speed"])
    text = str(err.value)
    assert "unknown parameter 'warp_speed' for the des model" in text
    assert "valid:" in text and "launch_overhead_us" in text and "poll" in text
    with pytest.raises(InputError, match="whole number"):
        resolve_params("des", ["max_channels"])
    with pytest.raises(InputError, match="no parameters"):
        resolve_params("analytic", [" "])
    assert [p.name for p in resolve_params("des", ["hop_latency", "pcie.remote_read_us"])] == [
        "remote_write_us", "pcie.remote_read_us"]


def test_too_few_rows_and_folds():
    data = synthetic("analytic", ANALYTIC_TRUTH, ranks=(8,), launches=("graph",), sizes=(1024, 4096))
    with pytest.raises(InputError, match="too few rows to fit 3 parameter"):
        calibrate(data, ["launch_overhead_us", "base_latency_us.ll", "bw_factor.ll"], model="analytic")
    with pytest.raises(InputError, match="cannot be split into 5 folds"):
        calibrate(synthetic("analytic", ANALYTIC_TRUTH, ranks=(8,), launches=("eager",), sizes=(1024, 4096, 8192)),
                  ["base_latency_us.ll"], model="analytic", folds=5)


# ---------------------------------------------------------------------------
# profiles


@pytest.fixture(scope="module")
def fitted():
    data = synthetic("analytic", ANALYTIC_TRUTH)
    return calibrate(data, ["launch", "hw_latency_us.nvlink.ll", "base_latency_us.ll"], model="analytic", folds=2)


def test_profile_round_trip(fitted, tmp_path):
    from collsim.models import simulate

    doc = profile_document(fitted, topology="hgx-h100", generation="hopper", sources=["/some/dir/m.csv"], folds=2,
                           seed=0, date="2026-01-02")
    path = write_profile(tmp_path / "p.yaml", doc)
    assert doc["provenance"] == f"calibrated from m.csv, {len(fitted.rows)} rows, 2026-01-02"
    costs = load_profile(path)
    assert costs == {"launch_overhead_us": pytest.approx(6.0), "base_latency_us": {"ll": pytest.approx(4.0)},
                     "hw_latency_us": {"nvlink": {"ll": pytest.approx(0.9)}}}
    assert load_profile(path, model="analytic") == costs
    prof = read_profile(path)
    assert prof.model == "analytic" and prof.topology == "hgx-h100" and prof.generation == "hopper"
    fit = prof.document["fit"]
    assert fit["cross_validation"]["folds"] == 2 and len(fit["cross_validation"]["per_fold"]) == 2
    assert set(fit["parameters"]) == set(ANALYTIC_TRUTH)
    r = simulate("hgx-h100", ranks=4, algorithm="ring", protocol="ll", size_bytes=65536, launch="eager",
                 model="analytic", costs=costs)
    truth = simulate("hgx-h100", ranks=4, algorithm="ring", protocol="ll", size_bytes=65536, launch="eager",
                     model="analytic", costs=costs_from_values("analytic", ANALYTIC_TRUTH))
    assert r.latency_us == pytest.approx(truth.latency_us, rel=1e-5)
    assert "/some/dir" not in path.read_text(encoding="utf-8")


def test_des_profile_is_a_flat_mapping(tmp_path):
    path = tmp_path / "des.yaml"
    path.write_text("collsim_profile: 1\nmodel: des\ncosts:\n  poll_period_us: 0.2\n  pcie.remote_read_us: 1.5\n",
                    encoding="utf-8")
    assert load_profile(path) == {"poll_period_us": 0.2, "pcie.remote_read_us": 1.5}


@pytest.mark.parametrize("text, message", [
    ("model: des\ncosts: {}\n", "no 'collsim_profile'"),
    ("collsim_profile: 9\nmodel: des\ncosts: {}\n", "format 9 is not supported"),
    ("collsim_profile: 1\ncosts: {}\n", "missing 'model'"),
    ("collsim_profile: 1\nmodel: des\n", "missing 'costs'"),
    ("collsim_profile: 1\nmodel: des\ncosts:\n  poll_period_us: fast\n", "costs.poll_period_us: expected a number"),
    ("collsim_profile: 1\nmodel: des\ncosts:\n  warp_speed: 1\n", "unknown cost parameter 'warp_speed'"),
    ("collsim_profile: 1\nmodel: des\ncosts:\n\tpoll_period_us: 1\n", "p.yaml:4: not valid YAML"),
    ("- just a list\n", "not a collsim profile"),
])
def test_bad_profiles_are_one_line_input_errors(tmp_path, text, message):
    path = tmp_path / "p.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as err:
        load_profile(path)
    assert message in str(err.value) and str(path) in str(err.value)
    assert "\n" not in str(err.value)


def test_profile_for_another_model_and_missing_file(fitted, tmp_path):
    doc = profile_document(fitted, topology="hgx-h100", generation="hopper", sources=["m.csv"], folds=2, seed=0)
    path = write_profile(tmp_path / "p.yaml", doc)
    with pytest.raises(InputError, match="fitted for the analytic model, not des"):
        load_profile(path, model="des")
    with pytest.raises(InputError, match="no such profile"):
        load_profile(tmp_path / "missing.yaml")


def test_shipped_example_profiles_load():
    from pathlib import Path

    profiles = sorted((Path(__file__).resolve().parents[1] / "profiles").glob("*.yaml"))
    assert profiles, "profiles/ holds example profiles"
    for path in profiles:
        prof = read_profile(path)
        assert load_profile(path, model=prof.model) == prof.costs
        assert prof.provenance.startswith("calibrated from ")
