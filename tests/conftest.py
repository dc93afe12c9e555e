"""Shared fixtures: run the CLI in-process, write scenario files."""
from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def collsim_cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """``collsim_cli("run", "x.yaml")`` → ``(exit code, stdout, stderr)``, in-process."""
    from collsim.cli import main

    def run(*argv: str) -> tuple[int, str, str]:
        try:
            code = main([str(a) for a in argv])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture
def write_scenario(tmp_path: Path) -> Callable[..., Path]:
    """``write_scenario(yaml_text, name="s.yaml")`` → path of the written file (text is dedented)."""

    def write(text: str, name: str = "s.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    return write
