"""docs/WRITING_PROTOCOLS.md runs: every ```python block, in order, in one namespace."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "WRITING_PROTOCOLS.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text(encoding="utf-8"))


def test_tutorial_has_code():
    assert len(blocks()) >= 8


def test_tutorial_runs(monkeypatch, tmp_path, capsys):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLLSIM_CACHE_DIR", str(tmp_path / "cache"))
    namespace = {"__name__": "tutorial", "__file__": str(DOC)}
    for i, code in enumerate(blocks(), 1):
        try:
            exec(compile(code, f"{DOC.name} block {i}", "exec"), namespace)
        except Exception as err:  # say which block broke
            pytest.fail(f"block {i} of {DOC.name} failed: {type(err).__name__}: {err}\n{code}")
    out = capsys.readouterr().out
    assert "store-16B-untorn" in out


def test_tutorial_protocol_is_the_example_file():
    """The protocol of the tutorial (after the fix) is the one shipped as examples/protocols/ll16.py."""
    text = DOC.read_text(encoding="utf-8")
    example = (ROOT / "examples" / "protocols" / "ll16.py").read_text(encoding="utf-8")
    for line in ('LINE = LineLayout("ll16", (Word(WordRole.DATA, 4),) * 3 + (Word(WordRole.FLAG, 4),), '
                 'store_bytes=16)', 'assumptions = ("store-16B-untorn",)',
                 'flag=self.epoch(seq), label="store_lines"))'):
        assert line in text and line in example
