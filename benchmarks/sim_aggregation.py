"""How far whole-range transfers are from a fine-grained simulation that issues every range in pieces.

For every shipped protocol x algorithm on hgx-h100 (8 ranks) at a few sizes, prints the latency with
each range costed as one transfer (the default) and with ``transfer_pieces = 64`` (every remote range
issued as 64 pieces, each placed when the previous one is through, so concurrent transfers interleave),
the relative difference and both event counts.

    python benchmarks/sim_aggregation.py [--pieces 64] [--ranks 8]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from collsim.ir.registry import list_protocols, load_protocol  # noqa: E402
from collsim.models import simulate  # noqa: E402
from collsim.units import format_size  # noqa: E402

SIZES = (64 * 1024, 1 << 20, 16 << 20, 256 << 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pieces", type=int, default=64)
    parser.add_argument("--ranks", type=int, default=8)
    args = parser.parse_args(argv)
    print("| protocol | algorithm | size | whole (us) | pieces (us) | diff % | events whole | events pieces |")
    print("|---|---|---|---|---|---|---|---|")
    worst = 0.0
    for name in list_protocols():
        for algorithm in load_protocol(name).algorithms:
            for size in SIZES:
                whole = simulate("hgx-h100", ranks=args.ranks, algorithm=algorithm, protocol=name, size_bytes=size)
                fine = simulate("hgx-h100", ranks=args.ranks, algorithm=algorithm, protocol=name, size_bytes=size,
                                costs={"transfer_pieces": args.pieces})
                diff = (whole.latency_us / fine.latency_us - 1) * 100
                worst = max(worst, abs(diff))
                print(f"| {name} | {algorithm} | {format_size(size)} | {whole.latency_us:.2f} | {fine.latency_us:.2f} "
                      f"| {diff:+.2f} | {whole.events} | {fine.events} |")
    print(f"\nlargest difference: {worst:.2f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
