"""A table's footer: what the tests are (the seed-aware one, the sentence-level ones, their resamples and seed), what
each column's runs can detect (simulated power), how the runs ended (stopped by patience, or at their epoch cap),
which code the runs ran, the scale, where and how long the runs ran, and where every difference from the paper is
listed."""

from __future__ import annotations

from dataclasses import dataclass, replace

from sarnmt.sweep import power, seed_tests
from sarnmt.sweep.cells import TableSettings, cap_reached, code_versions
from sarnmt.sweep.formats import record_text
from sarnmt.sweep.spec import METRICS, Scale, Table

DEFAULT = TableSettings()
DOCS = "docs/reproducing.md"
CALIBRATION = f"{DOCS}#calibration-of-the-seed-aware-test"
POWER_DOCS = f"{DOCS}#what-the-seeds-can-detect"
DEVIATIONS = f"{DOCS}#every-difference-from-the-paper"


def is_lm(table: Table) -> bool:
    return table.task == "lm"


def seed_test_note(table: Table, settings: TableSettings = DEFAULT) -> str:
    """The footer's account of the seed-aware test the table was rendered with."""
    lm = is_lm(table)
    items = "lines" if lm else "sentences"
    score = "perplexity" if lm else "BLEU"
    n, seed = settings.resampling.resamples, settings.resampling.seed
    if (settings.seed_test or "shared") == "v_sent":
        return (
            f"† p < 0.05, ‡ p < 0.01: the seed-aware test, Welch's test on the seed means with the test set's "
            "resampling variance added (Welch 1947, Satterthwaite 1946; runs and test "
            f"{items} both vary, after Koehn 2004 and Clark et al. 2011): Δ = mean of the row's runs - mean of the "
            f"baseline's, Var = s_r²/n_r + s_b²/n_b + v_sent, s² the sample variances over runs and v_sent the "
            f"variance of Δ over {n:,} resamples (numpy PCG64, generator seed {seed}) of the test {items}, paired for "
            f"both cells (every run's corpus {score} recomputed from the drawn {items}' statistics); df by "
            "Welch-Satterthwaite on the seed terms (v_sent with infinite df); p the upper tail of Student's t at Δ / "
            "sqrt(Var) (no floor: any 2 or more runs a side can reach p < 0.01). Its rejection rate under a true "
            "null, simulated at 3 v 3 to 5 v 5 runs, is within Monte Carlo error of its level or below it "
            f"({CALIBRATION}); at 2 v 2 it is at 0.05 but above 0.01, so ‡ needs {seed_tests.RUNS_FOR_P01} or more "
            "runs a side and p < 0.01 with fewer prints †."
        )
    return (
        "† p < 0.05, ‡ p < 0.01: the seed-aware test, Welch's test on the seed means with the test set's shared "
        f"variance added (Welch 1947; runs and test {items} both vary, after Koehn 2004 and Clark et al. 2011): Δ = "
        "mean of the row's runs - mean of the baseline's, Var = s_r²/n_r + s_b²/n_b + v_shared, s² the sample "
        "variances over runs and v_shared the part of the test set's variance of Δ that a system's runs share "
        f"(system x {items[:-1]}): from a two-way decomposition, runs x {items}, of each run's jackknife "
        f"pseudo-values over the test {items} (its corpus {score} recomputed without each), the variance of the two "
        f"cells' mean pseudo-values' difference less each run's own {items[:-1]} noise, which s² holds already; "
        "df: Welch's 1947 form on the seed terms, times (Var / seed terms)^1.5 for the known v_shared; p the upper "
        "tail of Student's t at Δ / sqrt(Var) (no floor). Its rejection rate under a true null, simulated in the "
        "regime of the mini runs (a model fitted to them: 0.048-0.051 at nominal 0.05, 0.010-0.013 at 0.01; and "
        "random splits of them) and in synthetic regimes at 3 v 3 and 5 v 5, is within the Monte Carlo band of its "
        "level but at 3 v 3 and nominal 0.01 in the language models' regime, where it is 0.012 (a real bias of "
        f"the df form where v_shared is a small part of Var; {CALIBRATION}); at 2 v 2 it is above 0.01 at nominal "
        f"0.01, so ‡ needs {seed_tests.RUNS_FOR_P01} or more runs a side and p < 0.01 with fewer prints †."
    )


def tests_notes(table: Table, settings: TableSettings = DEFAULT, scale: Scale | None = None) -> list[str]:
    """The footer's account of the tests: the seed-aware one, the sentence-level ones, what a cell shows."""
    lm = is_lm(table)
    items, item = ("lines", "line") if lm else ("sentences", "sentence")
    n = settings.resampling.resamples
    old = (settings.seed_test or "shared") == "v_sent"
    per_seed = scale is not None and scale.data_order == "per_seed"
    return [
        "Every test is one-sided, H1: the row is better than the baseline row of its column "
        f"({'lower perplexity' if lm else 'higher BLEU'}), as the paper's Table 1. "
        + seed_test_note(table, settings)
        + " Δ [95%]: Δ ± t_(0.975, df) sqrt(Var) (two-sided: its lower end is above 0 when p < 0.025, so a † can sit "
        "beside an interval that reaches below 0); n/a (1 run): the row or the baseline has one run, so no "
        "seed-aware test and no † marker.",
        "* p < 0.05, ** p < 0.01: the paper's paired t-test, sentence-level with seeds pooled (over test "
        f"{items}, each {item}'s {'mean log-likelihood per word' if lm else 'sentence BLEU'} averaged over the "
        f"cell's seeds, paired with the baseline's): it takes the {items}, not the runs, as the sample. The CSV "
        "also has the sentence-level paired bootstrap with seeds pooled (p_boot_sentence, "
        + (
            f"the same {n:,} resamples"
            if old
            else f"{n:,} resamples, numpy PCG64, generator seed {settings.resampling.seed}"
        )
        + "), the seed-aware test's df (seed_df)"
        + (
            ""
            if old
            else ", the earlier seed-aware test (p_seed_v_sent: v_sent, the paired bootstrap's variance of Δ "
            "over the same resamples, in place of v_shared, df by Welch-Satterthwaite; it counts each run's own "
            "sentence noise twice, and is conservative where that noise is much of the seed variance)"
        )
        + " and the two-level bootstrap's p (p_two_level: each "
        "resample draws each cell's runs with replacement, then the test items; the 8-epoch tables' seed-aware "
        "test, too liberal at 3-5 runs where the seed noise dominates). (sarnmt.score's bootstrap and randomisation "
        "p are two-sided; no table uses them.)",
        f"Cells: mean ± sample sd of {'test perplexity' if lm else 'corpus BLEU'} over seeds "
        + (
            "(lower is better), and the number of seeds. d: the LSTM's hidden size (the paper's in brackets)."
            if lm
            else (
                "(the seed sets the initialisation, the dropout masks and the order of the training batches: "
                "data_order per_seed), and the number of seeds."
                if per_seed
                else "(the seed sets the initialisation and the dropout masks; the data order is the same for every "
                "seed), and the number of seeds."
            )
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


def _name(scale: Scale | None, column) -> str:
    """A column as the footer names it: what ran where the scale says (``Multi30K En→De test2016``), else the
    paper's label."""
    return (scale.ran(column.pair, column.test) if scale is not None else None) or column.label


def _p(value: float) -> str:
    return "< 0.001" if value < 0.001 else f"{value:.3f}" if value < 0.01 else f"{value:.2f}"


@dataclass(frozen=True)
class RowPower:
    """What a row's comparison can detect (:func:`row_powers`), in the table's Δ convention (row minus baseline;
    negative is better for perplexity): ``detects`` the true Δ detected with power 0.8 at its seeds; where the
    paper has a gain over the baseline, ``paper`` its Δ, ``power`` the power at it, ``p`` the probability of the
    observed Δ or one further below under it and ``seeds`` the seeds a side for power 0.8 at it (None: over
    :data:`sarnmt.sweep.power.MAX_SEEDS`)."""

    runs: tuple[int, int]
    sd: float
    df: int
    detects: float
    paper: float | None = None
    power: float | None = None
    p: float | None = None
    seeds: int | None = None


def column_sd(table: Table, cells: dict, column) -> tuple[float, int] | None:
    """A column's seed sd pooled over its cells with two or more runs, and its df (:func:`power.pooled_sd`)."""
    return power.pooled_sd(
        [cells[r.key, column.key].score.scores for r in table.rows if cells[r.key, column.key].score]
    )


def row_powers(table: Table, cells: dict) -> dict[tuple[str, str], RowPower]:
    """Per (row, column) with a seed-aware test, what it can detect, simulated with the test itself
    (:mod:`sarnmt.sweep.power`): the column's pooled seed sd and the comparison's v_shared."""
    sign = -1.0 if is_lm(table) else 1.0
    found = {}
    for column in table.columns:
        pooled = column_sd(table, cells, column)
        if pooled is None:
            continue
        sd, df = pooled
        for row in table.rows:
            cell = cells[row.key, column.key]
            comparison = cell.score.comparison if cell.score else None
            if row.key == table.baseline or comparison is None or comparison.p_seed is None:
                continue
            regime = power.Regime(sd, comparison.v_test or 0.0)
            result = RowPower(comparison.runs, sd, df, sign * power.detectable(regime, comparison.runs))
            gain = _gain(table, row.key, column.key)
            if gain is not None and gain > 0:
                result = replace(
                    result,
                    paper=sign * gain,
                    power=power.power(regime, comparison.runs, gain),
                    p=power.p_under(comparison, gain, not is_lm(table)),
                    seeds=power.seeds_for(regime, gain),
                )
            found[row.key, column.key] = result
    return found


def power_note(table: Table, cells: dict, scale: Scale | None = None) -> str:
    """What each column's runs can detect (:func:`row_powers`): per row with a test, the true Δ it detects with
    power 0.8 at the row's and the baseline's seed counts; where the paper gives a gain over the baseline, the
    power at it, the seeds a side for power 0.8 at it and the probability of the observed Δ under it."""
    powers = row_powers(table, cells)
    parts = []
    for column in table.columns:
        name = _name(scale, column)
        pooled = column_sd(table, cells, column)
        if pooled is None:
            parts.append(f"{name}: no cell has two runs, so the seed sd is unknown")
            continue
        rows = []
        for row in table.rows:
            found = powers.get((row.key, column.key))
            if found is None:
                continue
            text = f"{row.label} at {found.runs[0]} v {found.runs[1]} detects Δ {found.detects:+.2f}"
            if found.paper is not None:
                needs = f"{found.seeds} seeds a side" if found.seeds else f"over {power.MAX_SEEDS} seeds a side"
                observed = cells[row.key, column.key].score.comparison.difference
                text += (
                    f"; the paper's {found.paper:+.1f}: power {found.power:.2f} (with power {power.POWER} at {needs}),"
                    f" p {_p(found.p)} for the observed {observed:+.2f}"
                )
            rows.append(text)
        sd, df = pooled
        parts.append(f"{name} (seed sd {sd:.2f}, {df} df): " + ("; ".join(rows) or "no row has a seed-aware test"))
    return (
        f"Power, simulated ({power.DRAWS:,} draws of the seed-aware test itself at p < {power.POWER_ALPHA}: run "
        "scores normal with the column's seed sd, pooled over its cells with two or more runs, and each "
        f"comparison's v_shared; {POWER_DOCS}): per row, the true Δ detected with power {power.POWER} at its seeds "
        "v the baseline's; where the paper has a gain over the baseline, the power at it (and the seeds a side for "
        f"power {power.POWER}) and p, the probability of the observed Δ or one further below if the paper's Δ "
        "held here (the seed-aware test of Δ = the paper's against Δ below it). " + "; ".join(parts) + "."
    )


def power_note_normal(table: Table, cells: dict) -> str:
    """The power line the superseded mini8 tables were published with (a normal approximation, optimistic for the
    seed-aware test; :func:`power_note` simulates it): per column, the seed sd pooled over its cells with two
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
    """How the runs ended: how many were stopped by the patience rule, how many reached their epoch cap without
    it firing (no line for records that do not say)."""
    records = {r["job"]: r for cell in cells.values() for r in cell.counted}
    capped = sorted(job for job, r in records.items() if cap_reached(r))
    stopped = sorted(job for job, r in records.items() if r.get("stopped_early") and not cap_reached(r))
    lines = []
    if stopped:
        lines.append(
            f"Stopped by patience: {len(stopped)} of {len(records)} runs ended because the patience rule fired (no "
            "lower dev score for the scale's number of checks) before their epoch cap, and were scored at their "
            "best dev checkpoint; stopping by patience is not shown convergence (dev scores still move between "
            "checks)."
        )
    if capped:
        lines.append(
            f"Cap reached: {len(capped)} of {len(records)} runs ended at their epoch cap without the patience rule "
            "firing (stopped_early false, or the selected checkpoint at the last update): averaged in their cells "
            "and flagged there (N cap reached); their scores are the capped runs', not stopped by patience."
        )
    return lines


def method_notes(table: Table, cells: dict, settings: TableSettings = DEFAULT, scale: Scale | None = None) -> list[str]:
    """The tests, the power line, how the runs ended and their code: the part of the footer that a LaTeX caption
    keeps. A table rendered with the earlier test (``seed_test`` v_sent: the superseded mini8) keeps the
    power line it was published with (:func:`power_note_normal`)."""
    old = (settings.seed_test or "shared") == "v_sent"
    return [
        *tests_notes(table, settings, scale),
        power_note_normal(table, cells) if old else power_note(table, cells, scale),
        *convergence_note(cells),
        *_code_notes(cells, settings),
    ]


def column_commits_note(table: Table, scale: Scale, cells: dict) -> list[str]:
    """Which column ran at which commit, one line per column (``Commits of Multi30K En→De test2016: 1a2b3c4d5e6f7a8,
    9f8e7d6c5b4a3f2.``), where the columns' commits differ; no line where every column with runs ran at the same
    commits (the runs' line then names them all). A column without runs has no line."""
    commits = {}
    for column in table.columns:
        records = [r for row in table.rows for r in cells[row.key, column.key].counted]
        if records:
            commits[column.key] = (_name(scale, column), sorted({_commit(r, 15, "no git checkout") for r in records}))
    if len({tuple(ran) for _, ran in commits.values()}) < 2:
        return []
    return [f"Commits of {name}: {', '.join(ran)}." for name, ran in commits.values()]


def not_run_note(table: Table, scale: Scale, cells: dict) -> list[str]:
    """How many of the table's jobs have no record, per set of runs (columns that are the same runs on other test
    sets count a job once) and per row: ``Not run: 27 of 42 jobs (Multi30K En→De: 6 of 21, + Memory RNN 3, ...;
    Multi30K De→En: 21 of 21)``; no line when every job has one."""
    groups: dict[str, list] = {}
    for column in table.columns:
        groups.setdefault(scale.job_pair(column.pair), []).append(column)
    parts, missing, planned = [], 0, 0
    for pair, columns in groups.items():
        first = [cells[row.key, columns[0].key] for row in table.rows]
        absent = sum(len(c.not_run) for c in first)
        jobs = sum(c.expected for c in first)
        missing, planned = missing + absent, planned + jobs
        if not absent:
            continue
        name = scale.pairs[pair].ran or _name(scale, columns[0])
        rows = [f"{c.row.label} {len(c.not_run)}" for c in first if c.not_run and len(c.not_run) < jobs]
        parts.append(f"{name}: {absent} of {jobs}" + ("" if absent == jobs else ", " + ", ".join(rows)))
    if not missing:
        return []
    return [
        f"Not run: {missing} of {planned} jobs have no record ({'; '.join(parts)}): their cells say N not run; a "
        "cell with fewer runs than its seeds says how many ran (2 of 3 seeds) and its Δ is tested on the runs there "
        "are (at 2 v 5 runs), one run a side none (n/a)."
    ]


def footer(table: Table, scale: Scale, cells: dict, settings: TableSettings = DEFAULT) -> list[str]:
    """Every line under the table: the scale, each pair's corpus and test splits, the metrics, :func:`method_notes`,
    the runs' wall time, hardware and commits (per column where the columns' differ: :func:`column_commits_note`),
    what was not counted and why."""
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
        names = ", ".join(_name(scale, c) for c in table.columns if c.metric == metric)
        lines.append(f"{names}: {METRICS[metric]}.")
    if table.against_other_row:
        lines.append(
            f"Baseline: every test, Δ and power line compares a row with {table.row(table.baseline).label} "
            f"(baseline={table.baseline}), not with the table's {table.row(table.declared_baseline).label} row; "
            "the power line's gains are the paper's differences from that row."
        )
    lines += method_notes(table, cells, settings, scale)
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
    lines += column_commits_note(table, scale, cells)
    lines += not_run_note(table, scale, cells)
    problems = [reason for cell in cells.values() for reason in (*cell.stale, *cell.broken, *cell.corrupt)]
    for reason in dict.fromkeys(problems):
        lines.append(f"Not counted: {reason}.")
    lines.append("Paper: the paper's number for the cell (its own corpora and scale).")
    lines.append(
        "Every difference from the paper (sizes, vocabulary, initialisation, optimiser, dropout, batch, clipping, "
        f"validation and stopping, length cap, truncated backprop, reference casing, corpora): {DEVIATIONS}."
    )
    return lines
