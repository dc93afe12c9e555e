"""`collsim run --profile`: a calibrated profile sits under the scenario's own costs."""
from __future__ import annotations

from pathlib import Path



from collsim.runner.run import execute

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


def test_a_scenario_names_its_profile_relative_to_itself(write_scenario, tmp_path):
    (tmp_path / "cal").mkdir()
    (tmp_path / "cal" / "p.yaml").write_text(PROFILE.read_text(encoding="utf-8"), encoding="utf-8")
    path = write_scenario("""
        topology: hgx-h100
        ranks: [8]
        sizes: [8B]
        algorithms: [ring]
        protocols: [ll]
        model: analytic
        profile: cal/p.yaml
        costs: {base_latency_us: {ll: 6.6}}
        """)
    from_key = execute(path, write=False)
    from_flag = execute(dict(SCENARIO, costs={"base_latency_us": {"ll": 6.6}}), write=False, profile=PROFILE)
    assert from_key.scenario.costs == from_flag.scenario.costs
    assert from_key.scenario.costs["base_latency_us"]["ll"] == 6.6  # costs: still wins over the profile
    assert from_key.frame()["latency_us"].tolist() == from_flag.frame()["latency_us"].tolist()
    assert from_key.scenario.profile == str(tmp_path / "cal" / "p.yaml")


def test_profile_flag_replaces_the_files_profile(write_scenario, tmp_path):
    (tmp_path / "other.yaml").write_text(PROFILE.read_text(encoding="utf-8"), encoding="utf-8")
    path = write_scenario("topology: hgx-h100\nranks: [8]\nsizes: [8B]\nalgorithms: [ring]\nprotocols: [ll]\n"
                          "model: analytic\nprofile: missing.yaml\n")
    run = execute(path, write=False, profile=tmp_path / "other.yaml")  # the file's missing profile is not read
    assert run.scenario.profile == str(tmp_path / "other.yaml")


def test_bad_profile_key_is_one_line_at_its_line(collsim_cli, write_scenario, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = write_scenario("topology: hgx-h100\nranks: [2]\nsizes: [8B]\nprofile: nowhere.yaml\n", name="p.yaml")
    code, out, err = collsim_cli("run", str(path))
    assert code == 2 and "Traceback" not in err
    line = err.strip().splitlines()
    assert len(line) == 1 and "p.yaml:4" in line[0] and "profile" in line[0] and "nowhere.yaml" in line[0]
    path = write_scenario(f"topology: hgx-h100\nranks: [2]\nsizes: [8B]\nmodel: des\nprofile: {PROFILE}\n",
                          name="q.yaml")
    code, out, err = collsim_cli("run", str(path))
    assert code == 2 and "q.yaml:5" in err and "fitted for the analytic model" in err
    assert not (tmp_path / "reports").exists()
