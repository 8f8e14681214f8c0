"""A table's footer: what the tests are (the seed-aware one, the sentence-level ones, their resamples and seed), how
many seeds would detect the paper's gains, how many runs reached their epoch cap, which code the runs ran, the
scale, where and how long the runs ran, and where every difference from the paper is listed."""

from __future__ import annotations

from sarnmt.sweep import power, seed_tests
from sarnmt.sweep.cells import TableSettings, cap_reached, code_versions
from sarnmt.sweep.formats import record_text
from sarnmt.sweep.spec import METRICS, Scale, Table

DEFAULT = TableSettings()
DOCS = "docs/reproducing.md"
CALIBRATION = f"{DOCS}#calibration-of-the-seed-aware-test"
DEVIATIONS = f"{DOCS}#every-difference-from-the-paper"


def is_lm(table: Table) -> bool:
    return table.task == "lm"


def tests_notes(table: Table, settings: TableSettings = DEFAULT) -> list[str]:
    """The footer's account of the tests: the seed-aware one, the sentence-level ones, what a cell shows."""
    lm = is_lm(table)
    items, item = ("lines", "line") if lm else ("sentences", "sentence")
    score = "perplexity" if lm else "BLEU"
    n, seed = settings.resampling.resamples, settings.resampling.seed
    return [
        "Every test is one-sided, H1: the row is better than the baseline row of its column "
        f"({'lower perplexity' if lm else 'higher BLEU'}), as the paper's Table 1. "
        f"† p < 0.05, ‡ p < 0.01: the seed-aware test, Welch's test on the seed means with the test set's "
        "resampling variance added (Welch 1947, Satterthwaite 1946; runs and test "
        f"{items} both vary, after Koehn 2004 and Clark et al. 2011): Δ = mean of the row's runs - mean of the "
        f"baseline's, Var = s_r²/n_r + s_b²/n_b + v_sent, s² the sample variances over runs and v_sent the variance "
        f"of Δ over {n:,} resamples (numpy PCG64, generator seed {seed}) of the test {items}, paired for both cells "
        f"(every run's corpus {score} recomputed from the drawn {items}' statistics); df by Welch-Satterthwaite on "
        "the seed terms (v_sent with infinite df); p the upper tail of Student's t at Δ / sqrt(Var) (no floor: any "
        "2 or more runs a side can reach p < 0.01). Its rejection rate under a true null, simulated at 3 v 3 to 5 v "
        f"5 runs, is within Monte Carlo error of its level or below it ({CALIBRATION}); at 2 v 2 it is at 0.05 but "
        f"above 0.01, so ‡ needs {seed_tests.RUNS_FOR_P01} or more runs a side and p < 0.01 with fewer prints †. "
        "Δ [95%]: Δ ± t_(0.975, df) sqrt(Var) (two-sided: its lower end is above 0 when p < 0.025, so a † can sit "
        "beside an interval that reaches below 0); n/a (1 run): the row or the baseline has one run, so no "
        "seed-aware test and no † marker.",
        "* p < 0.05, ** p < 0.01: the paper's paired t-test, sentence-level with seeds pooled (over test "
        f"{items}, each {item}'s {'mean log-likelihood per word' if lm else 'sentence BLEU'} averaged over the "
        f"cell's seeds, paired with the baseline's): it takes the {items}, not the runs, as the sample. The CSV "
        f"also has the sentence-level paired bootstrap with seeds pooled (p_boot_sentence, the same {n:,} "
        "resamples), the seed-aware test's df (seed_df) and the two-level bootstrap's p (p_two_level: each "
        "resample draws each cell's runs with replacement, then the test items; the 8-epoch tables' seed-aware "
        "test, too liberal at 3-5 runs where the seed noise dominates). (sarnmt.score's bootstrap and randomisation "
        "p are two-sided; no table uses them.)",
        f"Cells: mean ± sample sd of {'test perplexity' if lm else 'corpus BLEU'} over seeds "
        + (
            "(lower is better), and the number of seeds. d: the LSTM's hidden size (the paper's in brackets)."
            if lm
            else "(the seed sets the initialisation and the dropout masks; the data order is the same), and the "
            "number of seeds."
        ),
    ]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _hardware(info: dict) -> str:
    text = record_text(info.get("cpu", "?")) + (f" ({info['cpu_count']} cores)" if info.get("cpu_count") else "")
    return text + (f", {record_text(info['gpu'])}" if info.get("gpu") else "")


def _commit(record: dict, width: int, missing: str) -> str:
    """A record's commit, ``width`` characters of it, as inert text (:func:`~sarnmt.sweep.formats.record_text`)."""
    return record_text(str(record.get("commit") or missing)[:width]) + ("+dirty" if record.get("dirty") else "")


def _gain(table: Table, row_key: str, column_key: str) -> float | None:
    """The paper's gain of a row over its baseline in a column (lower perplexity counts as a gain)."""
    row, base = table.paper.get(row_key, {}).get(column_key), table.paper.get(table.baseline, {}).get(column_key)
    if row is None or base is None:
        return None
    return base - row if is_lm(table) else row - base


def power_note(table: Table, cells: dict) -> str:
    """How many seeds per row would detect the paper's gains: per column, the seed sd pooled over its cells with two
    or more runs, and per main row (every row but the baseline when none runs the main seeds) the paper's gain Δ
    and n = 2((z_0.95 + z_0.8) sd / Δ)² (:func:`sarnmt.sweep.power.seeds_for_power`)."""
    rows = [r for r in table.rows if r.key != table.baseline and r.seeds == "main"]
    rows = rows or [r for r in table.rows if r.key != table.baseline]
    parts = []
    for column in table.columns:
        pooled = power.pooled_sd(
            [cells[r.key, column.key].score.scores for r in table.rows if cells[r.key, column.key].score]
        )
        if pooled is None:
            parts.append(f"{column.label}: no cell has two runs, so the seed sd is unknown")
            continue
        sd, df = pooled
        needs = []
        for row in rows:
            gain = _gain(table, row.key, column.key)
            if gain is None:
                continue
            n = power.seeds_for_power(sd, gain)
            needs.append(f"{row.label} (Δ {gain:+.1f}) " + (f"{n}" if n is not None else "no gain to detect"))
        parts.append(f"{column.label} (sd {sd:.2f}, {df} df): " + ("; ".join(needs) or "no paper numbers"))
    return (
        "Power: seeds per row for a one-sided test of seed means at p < 0.05 to detect the paper's gain over its "
        f"baseline with power {power.POWER}, n = 2((z_0.95 + z_0.8) sd / Δ)² (normal approximation; sd the "
        "sample sd over seeds pooled over the column's cells with two or more runs; a lower bound for the seed-aware "
        "test, which also resamples the test set). " + "; ".join(parts) + "."
    )


def _code_notes(cells: dict, settings: TableSettings) -> list[str]:
    """What the footer says about the code that ran the cells: mixed-code cells, allow_mixed_code, unpinned and
    dirty runs."""
    lines = []
    ordered = list(cells.values())
    for cell in ordered:
        if cell.mixed or cell.mixed_averaged:
            runs = "; ".join(
                f"seed {r.get('seed')}: {_commit(r, 10, '?')} "
                f"source {record_text(str(r.get('source_hash') or 'unpinned')[:12])}"
                for r in cell.counted
            )
            verb = "averaged (allow_mixed_code=true)" if cell.mixed_averaged else "not averaged"
            lines.append(
                f"Mixed code, {verb}: {cell.row.label} / {cell.column.label}: {code_versions(cell.counted)} ({runs})."
            )
    if settings.allow_mixed_code:
        averaged = sum(1 for c in ordered if c.mixed_averaged)
        lines.append(
            "Runs of different code averaged: allow_mixed_code=true"
            + (f" ({averaged} cells)." if averaged else " (no cell had runs of different code).")
        )
    records = [r for c in ordered for r in c.counted]
    unpinned = {r["job"] for r in records if not r.get("source_hash")}
    if unpinned:
        lines.append(
            f"Unpinned: {len(unpinned)} of {len({r['job'] for r in records})} runs have no source hash (records "
            "written before runs were pinned): counted in their cells and averaged, their code known only by the "
            "commit below."
        )
    outside = {r["job"] for r in records if r.get("commit") is None and r.get("dirty") is None}
    if outside:
        lines.append(
            f"Not from a git checkout: {len(outside)} runs (an installed package): their code is known by the sarnmt "
            "version and source hash in their records, not by a commit."
        )
    dirty = {r["job"] for r in records if r.get("dirty")}
    if dirty:
        allowed = {r["job"] for r in records if r.get("dirty") and r.get("allow_dirty")}
        lines.append(
            f"Dirty: {len(dirty)} runs from a checkout with uncommitted changes"
            + (f", {len(allowed)} of them started with allow_dirty=true" if allowed else "")
            + f" ({', '.join(sorted(dirty))})."
        )
    return lines


def convergence_note(cells: dict) -> list[str]:
    """How many runs reached their epoch cap without the patience rule firing (none: no line)."""
    records = {r["job"]: r for cell in cells.values() for r in cell.counted}
    capped = sorted(job for job, r in records.items() if cap_reached(r))
    if not capped:
        return []
    return [
        f"Cap reached: {len(capped)} of {len(records)} runs ended at their epoch cap without the patience rule "
        "firing (stopped_early false, or the selected checkpoint at the last update): averaged in their cells and "
        "flagged there (N cap reached); their scores are the capped runs', not converged ones."
    ]


def method_notes(table: Table, cells: dict, settings: TableSettings = DEFAULT) -> list[str]:
    """The tests, the power line, the runs' convergence and code: the part of the footer that a LaTeX caption
    keeps."""
    return [
        *tests_notes(table, settings),
        power_note(table, cells),
        *convergence_note(cells),
        *_code_notes(cells, settings),
    ]


def footer(table: Table, scale: Scale, cells: dict, settings: TableSettings = DEFAULT) -> list[str]:
    """Every line under the table: the scale, each pair's corpus and test splits, the metrics, :func:`method_notes`,
    the runs' wall time, hardware and commits, what was not counted and why."""
    lines = [f"Scale {scale.name}: {scale.describe(table.task)}."]
    for pair in dict.fromkeys(c.pair for c in table.columns):
        p = scale.pairs[pair]
        runs = scale.pairs[scale.job_pair(pair)]
        tests = ", ".join(
            f"{c.label} = split {runs.tests[scale.job_test(pair, c.test)]}" for c in table.columns if c.pair == pair
        )
        shared = f" (the runs of {runs.key})" if p.same_as else ""
        lines.append(f"{pair}: {p.label}{shared}; {tests}." + (f" {p.note}" if p.note else ""))
    for metric in dict.fromkeys(c.metric for c in table.columns):
        lines.append(f"{', '.join(c.label for c in table.columns if c.metric == metric)}: {METRICS[metric]}.")
    if table.against_other_row:
        lines.append(
            f"Baseline: every test, Δ and power line compares a row with {table.row(table.baseline).label} "
            f"(baseline={table.baseline}), not with the table's {table.row(table.declared_baseline).label} row; "
            "the power line's gains are the paper's differences from that row."
        )
    lines += method_notes(table, cells, settings)
    records = [r for cell in cells.values() for r in cell.counted]
    if records:
        seconds = sorted({r["job"]: r.get("wall_seconds", {}).get("total", 0.0) for r in records}.values())
        commits = sorted({_commit(r, 15, "no git checkout") for r in records})
        hardware = sorted({_hardware(r.get("hardware", {})) for r in records})
        lines.append(
            f"{len(seconds)} runs, wall time per job {_duration(min(seconds))}-{_duration(max(seconds))} "
            f"(total {sum(seconds) / 3600:.2f} h); hardware: {'; '.join(hardware)}; "
            f"commits: {', '.join(commits)}."
        )
    problems = [reason for cell in cells.values() for reason in (*cell.stale, *cell.broken, *cell.corrupt)]
    for reason in dict.fromkeys(problems):
        lines.append(f"Not counted: {reason}.")
    lines.append("Paper: the paper's number for the cell (its own corpora and scale).")
    lines.append(
        "Every difference from the paper (sizes, vocabulary, initialisation, optimiser, dropout, batch, clipping, "
        f"validation and stopping, length cap, truncated backprop, reference casing, corpora): {DEVIATIONS}."
    )
    return lines
