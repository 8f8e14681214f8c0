"""MkDocs hook: the result pages, generated at build time from the records under ``sweeps/results/``.

Nothing measured is retyped into ``docs/``: each page is built from the files a sweep, a benchmark or the GPU check
published (``make tables`` renders the tables, ``make bench`` and ``make gpu-check`` write their records), and the
figures are copied into the built site from there. A record that cannot be read is named on its page, never skipped
silently. The pages go under ``results/`` and into the nav's "Results" section (``mkdocs.yml``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "sweeps" / "results"
NOTES = "README.md"  # a results folder's notes, shown on its page before its records

_pages: dict[str, str] = {}  # src_uri -> Markdown
_images: dict[str, Path] = {}  # src_uri -> file to copy
_titles: list[tuple[str, str]] = []  # (title, src_uri) in nav order


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _cell(text: str) -> str:
    """Markdown tables written by the sweeps put |Θ| in a header: escape the bars that are not cell borders."""
    return text.replace("|Θ|", "\\|Θ\\|")


def _read(path: Path) -> str:
    return _cell(path.read_text(encoding="utf-8")).rstrip() + "\n"


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _record(path: Path, parts: list[str]) -> dict | None:
    """A JSON record's content, or None after noting in ``parts`` that it is unreadable."""
    try:
        return _json(path)
    except (OSError, ValueError) as err:
        parts.append(f"`{_rel(path)}`: unreadable ({err}).\n")
        return None


def _fmt(value: Any, digits: int = 1) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def _source_note(paths: list[Path]) -> str:
    names = ", ".join(f"`{_rel(p)}`" for p in paths)
    return (
        '!!! note "Generated"\n'
        f"    This page is built from {names} when the site is built; edit the records, not the page.\n"
    )


def _image(page_dir: str, png: Path, alt: str) -> str:
    uri = f"{page_dir}/{'-'.join(png.relative_to(RESULTS).parts)}"  # mini-tables-table1.png: unique per scale
    _images[uri] = png
    return f"![{alt}]({uri.rsplit('/', 1)[-1]})\n"


def _notes(folder: Path) -> list[str]:
    """A results folder's own notes (``README.md``: how its records were made, dated measurements, what they show),
    without the README's title (the page has its own): as parts of the page, or none."""
    readme = folder / NOTES
    if not readme.exists():
        return []
    first, _, rest = _read(readme).partition("\n")
    return [rest.lstrip("\n") if first.startswith("# ") else f"{first}\n{rest}"]


def _table_number(path: Path) -> tuple[int, str]:
    m = re.search(r"(\d+)", path.stem)
    return (int(m.group(1)) if m else 0, path.stem)


def _scale_page(scale: Path) -> None:
    tables = sorted((scale / "tables").glob("table*.md"), key=_table_number)
    if not tables:
        return
    uri = f"results/{scale.name}.md"
    notes = _notes(scale)
    parts = [
        f"# The {scale.name} scale\n",
        _source_note([scale / "tables", *([scale / NOTES] if notes else [])]),
        f"The tables of the `{scale.name}` scale as `python -m sarnmt.tables table=all scale={scale.name}` "
        f"rendered them from the records in `{_rel(scale / 'records')}` (how: [Reproducing the "
        "tables](../reproducing.md)), each with its figure of the per-seed scores"
        + (", after the notes on these runs" if notes else "")
        + ".\n",
        *notes,
    ]
    for md in tables:
        n, _ = _table_number(md)
        parts.append(f"## Table {n}\n")
        parts.append(_read(md))
        png = md.with_suffix(".png")
        if png.exists():
            parts.append(_image("results", png, f"Table {n} at the {scale.name} scale, per seed"))
    _pages[uri] = "\n".join(parts)
    _titles.append((f"The {scale.name} scale", uri))


def _systems_page(folder: Path) -> None:
    table = folder / "table.md"
    if not table.exists():
        return
    sig = sorted(folder.glob("significance-*.md"))
    parts = [
        "# Every system of the seeds on Multi30K\n",
        _source_note([table, *sig]),
        "One seed of each system at the `_small` size on Multi30K En→De, test2016, BLEU 13a on detokenised text "
        "unless the column says otherwise (`make systems-m30k`; the setting and the reading of these numbers: "
        "[Configurations](../systems.md#every-system-of-the-seeds-on-multi30k)).\n",
        _read(table),
    ]
    for md in sig:
        parts.append(f"## {md.stem.replace('significance-', 'Against ')}\n")
        parts.append(_read(md))
    bf16 = RESULTS / "bf16-m30k"
    evals = sorted(bf16.glob("*/*/eval.test.json"))
    if evals:
        parts.append("## The cGRU baseline trained in bf16\n")
        parts.append(
            f"The same system trained with `trainer.precision=bf16-mixed` (records in `{_rel(bf16)}`; "
            "see [Performance](../performance.md)).\n"
        )
        parts.append("| system | decoding | BLEU | tokenised BLEU | chrF | sentences/s | record |")
        parts.append("|---|---|---:|---:|---:|---:|---|")
        for path in evals:
            try:
                rec = _json(path)
            except (OSError, ValueError) as err:
                parts.append(f"| {path.parent.parent.name} | {path.parent.name} | unreadable: {err} | | | | |")
                continue

            def score(key: str, rec: dict = rec) -> str:
                v = rec.get(key)
                v = v.get("score") if isinstance(v, dict) else v
                return _fmt(v, 2) if v is not None else "–"

            parts.append(
                f"| {path.parent.parent.name} | {path.parent.name} | {score('bleu')} | {score('bleu_tokenized')} "
                f"| {score('chrf')} | {_fmt(rec.get('sentences_per_second'))} | `{_rel(path)}` |"
            )
        parts.append("")
    uri = "results/systems-m30k.md"
    _pages[uri] = "\n".join(parts)
    _titles.append(("Every system on Multi30K", uri))


def _gpu_page(folder: Path) -> None:
    runs = sorted(p for p in folder.iterdir() if p.is_dir())
    if not runs:
        return
    parts = [
        "# The GPU check\n",
        _source_note([folder]),
        "Every run of `make gpu-check` (`benchmarks/gpu_check.py`, described on [Performance](../performance.md"
        "#the-gpu-check-make-gpu-check)), newest first, from its records: the summary, the targets, the bench "
        "tables and the main job's figures.\n",
        *_notes(folder),
    ]
    for run in reversed(runs):
        parts.append(f"## {run.name}\n")
        summary = _record(run / "summary.json", parts)
        if summary is None:
            continue
        parts.append(
            f"Device **{summary.get('device')}**, torch {summary.get('torch')}, CUDA {summary.get('cuda')}; "
            f"all steps passed: {summary.get('ok')}; finished: {summary.get('finished')}; dry run: "
            f"{summary.get('dry_run')}.\n"
        )
        parts.append("| step | passed | seconds |")
        parts.append("|---|---|---:|")
        for step, info in summary.get("steps", {}).items():
            parts.append(f"| {step} | {info.get('ok')} | {_fmt(info.get('seconds'))} |")
        parts.append("")
        tests = summary.get("figures", {}).get("tests")
        if tests:
            parts.append("Tests marked `gpu`: " + ", ".join(f"{k} {v}" for k, v in tests.items()) + ".\n")
        targets = summary.get("targets") or {}
        if targets:
            parts.append("| target | measured | target | met |")
            parts.append("|---|---:|---:|---|")
            for name, t in targets.items():
                parts.append(f"| `{name}` | {_fmt(t.get('value'))} | {_fmt(t.get('target'))} | {t.get('met')} |")
            parts.append("")
        for bench in sorted(run.glob("bench-*.json")):
            record = _record(bench, parts)
            if record is None:
                continue
            md = (record.get("result") or {}).get("markdown")
            if md:
                parts.append(f"### {bench.stem}\n")
                parts.append(_cell(md).rstrip() + "\n")
        train = run / "train.json"
        if train.exists():
            result = (_record(train, parts) or {}).get("result") or {}
            if result:
                parts.append("### train\n")
                parts.append("| figure | value |")
                parts.append("|---|---|")
                for key in (
                    "model",
                    "decoder",
                    "precision",
                    "optimizer",
                    "max_tokens",
                    "steps",
                    "epochs",
                    "target_tok_s",
                    "steady_target_tok_s",
                    "wall_seconds",
                    "peak_mib",
                ):
                    if key in result:
                        parts.append(f"| `{key}` | {_fmt(result[key])} |")
                parts.append("")
        parts.append("Records: " + ", ".join(f"`{p.name}`" for p in sorted(run.iterdir())) + f" in `{_rel(run)}`.\n")
    uri = "results/gpu.md"
    _pages[uri] = "\n".join(parts)
    _titles.append(("The GPU check", uri))


def _bench_page(folder: Path) -> None:
    reports = sorted(path for path in folder.glob("*.md") if path.name != NOTES)
    if not reports:
        return
    parts = [
        "# Benchmarks\n",
        _source_note([folder]),
        "The reports of `make bench` (`python -m sarnmt.bench`) that were published, each as the bench wrote it, with "
        "its plot where there is one (the JSON beside each has every figure), after the measurements noted by hand "
        "in the folder's README. What they measure and how to read them: [Performance](../performance.md).\n",
        *_notes(folder),
    ]
    for md in reports:
        parts.append(f"## {md.stem}\n")
        parts.append(_read(md))
        png = md.with_suffix(".png")
        if png.exists():
            parts.append(_image("results", png, f"Training tokens/s against length and batch size, {md.stem}"))
    uri = "results/bench.md"
    _pages[uri] = "\n".join(parts)
    _titles.append(("Benchmarks", uri))


def _pilot_page(folder: Path) -> None:
    readme = folder / "README.md"
    if not readme.exists():
        return
    text = _read(readme)
    parts = [_source_note([folder]), text]
    data = folder / "dropout.json"
    if data.exists():
        runs = (_record(data, parts) or {}).get("runs", {})
        if runs:
            parts.append("## The curves, from `dropout.json`\n")
            parts.append("| rate | update | dev cost | greedy dev BLEU |")
            parts.append("|---|---:|---:|---:|")
            for rate, points in runs.items():
                if not isinstance(points, list):  # a note beside the curves ("0.3_note": why it stopped)
                    continue
                for p in points:
                    cost, bleu = _fmt(p.get("dev_cost"), 3), _fmt(p.get("dev_bleu_greedy"), 2)
                    parts.append(f"| {rate} | {p.get('step')} | {cost} | {bleu} |")
            notes = [f"- {k.replace('_note', '')}: {v}" for k, v in runs.items() if isinstance(v, str)]
            parts.append("\n".join(notes) + "\n" if notes else "")
    # the README's own title becomes the page's: put the note after it
    first, _, rest = parts[1].partition("\n")
    uri = "results/mini-pilot.md"
    _pages[uri] = "\n".join([first, "", parts[0], rest, *parts[2:]])
    _titles.append(("The mini scale's dropout pilot", uri))


def _peers_page(folder: Path) -> None:
    """The quality comparison beside JoeyNMT and fairseq (``python -m benchmarks.peers.quality render``): its README,
    the figure shown from this site's copy, and the profile of one update (``profile/profile.md``) as a page beside
    it."""
    readme = folder / "README.md"
    if not readme.exists():
        return
    figure = folder / "dev_bleu_vs_time.png"
    text = _read(readme)
    if figure.exists():  # the README shows it beside itself; the site, from its copy
        shown = _image("results", figure, "dev BLEU against time").rstrip("\n")
        text = text.replace(f"![dev BLEU against time]({figure.name})", shown)
    profile = folder / "profile" / "profile.md"
    if profile.exists():  # one profiled update of each system: a page of its own, linked from the README's section
        p_first, _, p_rest = _read(profile).partition("\n")
        _pages["results/peers-quality-profile.md"] = "\n".join([p_first, "", _source_note([profile.parent]), p_rest])
        text = text.replace("](profile/profile.md)", "](peers-quality-profile.md)")
    first, _, rest = text.partition("\n")
    uri = "results/peers-quality.md"
    _pages[uri] = "\n".join([first, "", _source_note([folder]), rest])
    _titles.append(("Beside JoeyNMT and fairseq", uri))
    if profile.exists():
        _titles.append(("One update of each, profiled", "results/peers-quality-profile.md"))


def _index() -> None:
    lines = [
        "# Results\n",
        "Every page in this section is generated from the records under `sweeps/results/` when the site is built "
        "(`docs/hooks/results.py`): the tables of each scale with their figures, every system on Multi30K, the "
        "GPU check, the benchmarks and the mini scale's dropout pilot. The text that reads these numbers, with the "
        "conditions they were measured in, is on [Reproducing the tables](../reproducing.md), "
        "[Configurations](../systems.md) and [Performance](../performance.md).\n",
    ]
    for title, uri in _titles:
        lines.append(f"- [{title}]({uri.split('/', 1)[1]})")
    _pages["results/index.md"] = "\n".join(lines) + "\n"


def _build() -> None:
    _pages.clear()
    _images.clear()
    _titles.clear()
    if RESULTS.is_dir():
        for scale in sorted(p for p in RESULTS.iterdir() if (p / "tables").is_dir()):
            _scale_page(scale)
        _systems_page(RESULTS / "systems-m30k")
        if (RESULTS / "gpu").is_dir():
            _gpu_page(RESULTS / "gpu")
        if (RESULTS / "bench").is_dir():
            _bench_page(RESULTS / "bench")
        _pilot_page(RESULTS / "mini-pilot")
        _peers_page(RESULTS / "peers-quality")
    _index()


def on_config(config: Any) -> Any:
    """Fill the nav's "Results" section with the generated pages."""
    _build()
    nav = config.get("nav") or []
    for i, item in enumerate(nav):
        if isinstance(item, dict) and "Results" in item:
            nav[i] = {"Results": ["results/index.md", *({t: u} for t, u in _titles)]}
    return config


def on_files(files: Files, config: Any) -> Files:
    """Add the generated pages and copy the figures they show."""
    for uri, text in _pages.items():
        files.append(File.generated(config, uri, content=text))
    for uri, path in _images.items():
        files.append(File.generated(config, uri, abs_src_path=str(path)))
    return files
