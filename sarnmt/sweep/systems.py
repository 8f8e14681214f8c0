"""The comparison of every system of the seeds on one corpus (``make systems-m30k``, ``sweeps/systems/run.sh``):
one Markdown row per system, read from its ``sarnmt.evaluate`` records ``<results>/<system>/{beam5,greedy}/
eval.test.json``. A system whose records are not both there is listed as not finished, never left out.

``sarnmt sweep-systems [results_dir=DIR]`` (:mod:`sarnmt.cli.sweep_systems`) prints the table (default
``sweeps/results/systems-m30k``; ``sarnmt/conf/sweep_systems.yaml``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sarnmt.errors import InputError
from sarnmt.utils.json_bounds import JsonError, load_file

SEARCHES = ("beam5", "greedy")


def _read(path: Path) -> dict[str, Any] | None:
    if not path.is_file():
        return None
    try:
        return load_file(path)
    except JsonError as err:
        raise InputError(f"{path}: not a JSON record ({err})") from err


def _name(target: str | None) -> str:
    return "" if not target else target.rsplit(".", 1)[-1]


def systems_table(results_dir: Path) -> str:
    """:param results_dir: one folder per system.  :returns: the Markdown table (header and one row per system)."""
    folders = sorted(p for p in Path(results_dir).iterdir() if p.is_dir()) if Path(results_dir).is_dir() else []
    if not folders:
        raise InputError(f"{results_dir}: no system folders (run sweeps/systems/run.sh first)")
    lines = [
        "| system | model | decoder | parameters | updates | BLEU beam 5 | BLEU greedy | tokenised BLEU beam 5 "
        "| chrF beam 5 |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for folder in folders:
        records = {search: _read(folder / search / "eval.test.json") for search in SEARCHES}
        first = next((r for r in records.values() if r is not None), None)
        if first is None or any(r is None for r in records.values()):
            lines.append(f"| {folder.name} | | | | | not finished | | | |")
            continue
        beam, greedy = records["beam5"], records["greedy"]
        model = first.get("model", {})
        lines.append(
            f"| {folder.name} | {_name(model.get('model', {}).get('_target_'))} "
            f"| {_name(model.get('decoder', {}).get('_target_'))} | {first['parameters']:,} | {first['global_step']:,} "
            f"| {beam['bleu']['score']:.2f} | {greedy['bleu']['score']:.2f} | {beam['bleu_tokenized']['score']:.2f} "
            f"| {beam['chrf']['score']:.2f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":  # python -m sarnmt.sweep.systems: an alias of sarnmt sweep-systems (run_alias says how)
    from sarnmt.utils.hydra_app import run_alias

    run_alias()
