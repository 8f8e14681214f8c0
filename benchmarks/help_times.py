"""How long ``sarnmt <command> --help`` (and ``--version``) takes, each command run as a new process: the median
of ``--repeats`` runs (default 3), with the machine named. A benchmark that prints figures, not a test: compare
commands within one run, on a quiet machine.

    .venv/bin/python benchmarks/help_times.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

from sarnmt.cli import COMMANDS


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def timed(args: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sarnmt", *args], capture_output=True, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(f"{cpu_name()}, {os.cpu_count()} CPUs, load average {load:.2f}; median of {options.repeats} runs")
    print("| command | seconds |\n|---|---:|")
    for args in [["--version"], ["--help"], *([name, "--help"] for name in COMMANDS)]:
        median = statistics.median(timed(args) for _ in range(options.repeats))
        print(f"| sarnmt {' '.join(args)} | {median:.2f} |", flush=True)


if __name__ == "__main__":
    main()
