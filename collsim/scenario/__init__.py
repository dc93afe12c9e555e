"""Scenario files: what to run, checked before anything runs.

>>> from collsim.scenario import load_scenario            # doctest: +SKIP
>>> s = load_scenario("scenarios/8gpu.yaml")              # doctest: +SKIP
>>> s.name, s.ranks                                       # doctest: +SKIP
('8gpu', (2, 4, 8))
"""
from __future__ import annotations

from collsim.scenario.loader import load_scenario, scenario_from_dict
from collsim.scenario.spec import FIELD_HELP, Scenario, ScenarioFile

__all__ = ["Scenario", "ScenarioFile", "FIELD_HELP", "load_scenario", "scenario_from_dict"]
