"""Walks every property object of the "1m" simulator preset over HTTP and reports the server's memory.

The simulator computes snapshots from their index, so its peak RSS must stay flat however far the
walk goes: the figure after the first pages and after the last one should be about the same.

    python benchmarks/sim_memory.py [--dataset 1m] [--limit 2000] [--max-pages N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pin_chessboard_pipelines.runtime.embedded import free_port  # noqa: E402
from pin_chessboard_pipelines.talent.client import TalentApiClient  # noqa: E402


def peak_rss_mib(pid: int) -> float:
    """VmHWM (peak resident set) of a process, in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc status")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="1m")
    parser.add_argument("--limit", type=int, default=2000)
    parser.add_argument("--max-pages", type=int, default=0, help="stop after this many pages (0 = all)")
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "pin_chessboard_pipelines.cli", "talent-sim", "serve", "--port", str(port)]
        + ["--dataset", args.dataset],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "TALENT_API_TOKEN": ""},
    )
    assert server.stdout is not None
    try:
        print(server.stdout.readline().strip())
        idle = peak_rss_mib(server.pid)
        pages = objects = 0
        early = None
        cursor = None
        started = time.perf_counter()
        with TalentApiClient(f"http://127.0.0.1:{port}") as client:
            while True:
                page = client.list_page("property-objects", cursor, args.limit)
                pages += 1
                objects += len(page.items)
                if pages == 10:
                    early = peak_rss_mib(server.pid)
                cursor = page.next_cursor
                if cursor is None or pages == args.max_pages:
                    break
        elapsed = time.perf_counter() - started
        final = peak_rss_mib(server.pid)
        print(f"pages={pages} objects={objects} limit={args.limit} seconds={elapsed:.1f}")
        print(f"pages/s={pages / elapsed:.1f} objects/s={objects / elapsed:,.0f}")
        print(
            f"server peak RSS MiB: idle={idle:.1f} after 10 pages={early or final:.1f} "
            f"after {pages} pages={final:.1f} growth after page 10={final - (early or final):.1f}"
        )
    finally:
        server.terminate()
        server.wait(timeout=10)
        server.stdout.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
