"""Sizes, ranges and rank lists (collsim.units)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collsim.errors import InputError
from collsim.units import (
    format_size,
    parse_int_range,
    parse_ranks,
    parse_size,
    parse_size_range,
    parse_sizes,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("8", 8),
        (8, 8),
        ("8B", 8),
        ("8 B", 8),
        ("4KiB", 4096),
        ("4kib", 4096),
        ("4KB", 4000),
        ("4K", 4096),
        ("64MiB", 64 * 1024**2),
        ("2MB", 2_000_000),
        ("1GiB", 1024**3),
        ("1GB", 10**9),
        ("1.5KiB", 1536),
        ("0.5MiB", 512 * 1024),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("bad", ["0", 0, "-8", -8, "1.5B", "0.3KB1", "8XB", "", "KiB", True, None, [8], "1.1"])
def test_parse_size_rejects(bad):
    with pytest.raises(InputError):
        parse_size(bad)


def test_parse_size_message_is_one_line():
    with pytest.raises(InputError) as err:
        parse_size("3.5B")
    assert "\n" not in str(err.value)
    assert "whole number of bytes" in str(err.value)


def test_size_ranges():
    assert parse_size_range("8B..64MiB x2") == [8 * 2**i for i in range(24)]
    assert parse_size_range("8B..64MiB x4")[-1] == 32 * 1024**2
    assert parse_size_range("8B..64MiB x4")[:3] == [8, 32, 128]
    assert parse_size_range("8B..64MiB +1KiB")[:3] == [8, 8 + 1024, 8 + 2048]
    assert parse_size_range("1KiB..4KiB +1KiB") == [1024, 2048, 3072, 4096]
    assert parse_size_range("1KiB..1KiB") == [1024]
    assert parse_sizes(["8B..32B", "1KiB", 16]) == [8, 16, 32, 1024]


@pytest.mark.parametrize("bad", ["64B..8B", "8B..64B x1", "8B..64B x0.5", "8B..64B +0", "8B..", "..8B", "0..8B x2"])
def test_size_range_rejects(bad):
    with pytest.raises(InputError):
        parse_size_range(bad)


def test_rank_lists_and_ranges():
    assert parse_ranks("2..8") == [2, 3, 4, 5, 6, 7, 8]
    assert parse_ranks("2..72 x2") == [2, 4, 8, 16, 32, 64]
    assert parse_ranks(["2..72 x2", 72]) == [2, 4, 8, 16, 32, 64, 72]
    assert parse_ranks([2, 4, 8]) == [2, 4, 8]
    assert parse_ranks(8) == [8]
    assert parse_ranks("2, 4") == [2, 4]
    assert parse_int_range("8..32 +8") == [8, 16, 24, 32]


@pytest.mark.parametrize("bad", [0, -2, "0..4", "a..b", "2..x", 2.5, True, "2..8 x1", []])
def test_ranks_reject(bad):
    with pytest.raises(InputError):
        parse_ranks(bad)


def test_format_size_examples():
    assert [format_size(n) for n in (8, 4096, 64 * 1024**2, 1024**3, 3000, 1536)] == [
        "8B",
        "4KiB",
        "64MiB",
        "1GiB",
        "3KB",
        "1536B",
    ]


@given(st.integers(min_value=1, max_value=2**50))
def test_format_parse_round_trip(n):
    assert parse_size(format_size(n)) == n


@given(st.integers(min_value=0, max_value=40), st.sampled_from(["B", "KiB", "MiB", "GiB", "KB", "MB"]))
def test_parse_format_round_trip_units(k, unit):
    text = f"{k + 1}{unit}"
    n = parse_size(text)
    assert parse_size(format_size(n)) == n
    assert len(format_size(n)) <= len(str(n)) + 1
