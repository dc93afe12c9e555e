"""`collsim run --profile`: a calibrated profile sits under the scenario's own costs."""
from __future__ import annotations

from pathlib import Path



from collsim.results import execute

REPO = Path(__file__).resolve().parents[1]
PROFILE = REPO / "profiles" / "hgx-h100-analytic.yaml"
SCENARIO = {"topology": "hgx-h100", "ranks": [8], "sizes": ["8B"], "algorithms": ["ring"], "protocols": ["ll"],
            "launch": "graph", "model": "analytic"}


def test_profile_changes_the_costs_and_the_scenario_still_wins(tmp_path):
    plain = execute(dict(SCENARIO), write=False).frame()
    calibrated = execute(dict(SCENARIO), write=False, profile=PROFILE)
    assert calibrated.scenario.costs["base_latency_us"]["ll"] != 6.6
    assert float(calibrated.frame()["latency_us"][0]) != float(plain["latency_us"][0])
    mine = dict(SCENARIO, costs={"base_latency_us": {"ll": 6.6}})
    pinned = execute(mine, write=False, profile=PROFILE)
    assert pinned.scenario.costs["base_latency_us"]["ll"] == 6.6
    assert pinned.scenario.costs["hw_latency_us"]  # the rest of the profile is kept


def test_profile_for_another_model_is_refused(collsim_cli, write_scenario, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario("topology: hgx-h100\nranks: [2]\nsizes: [8B]\nmodel: des\n", name="p.yaml")
    code, out, err = collsim_cli("run", path, "--profile", str(PROFILE))
    assert code == 2
    assert "fitted for the analytic model" in err and "Traceback" not in err
    assert not (tmp_path / "reports").exists()
