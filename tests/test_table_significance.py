"""The tables' significance and code rules: the seed-aware two-level bootstrap against the sentence-level tests,
the power line, and cells of mixed, unpinned or dirty code, one run, a NaN score or missing statistics.

Synthetic per-sentence BLEU statistics stand in for runs: sentence i of run j matches a fraction
``level_j + gain + difficulty_i + noise_ij`` of its n-grams, so a row can beat the baseline in every sentence of
every seed while its seeds swing widely.
"""

from __future__ import annotations

import gzip
import json
import logging
import math
import os
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from sarnmt.cli.tables import render_tables
from sarnmt.errors import InputError
from sarnmt.sweep import power, seed_tests, stats
from sarnmt.sweep.cells import Cell, TableSettings, code_versions
from sarnmt.sweep.job import JobSettings, job_config
from sarnmt.sweep.plan import plan_jobs
from sarnmt.sweep.records import gzip_bytes, write_json
from sarnmt.sweep.render import column_names, heading, seed_marker
from sarnmt.sweep.seed_tests import Resampling
from sarnmt.sweep.spec import load_scale, load_table
from tests.cli_helpers import one_error, run_cli

TOTALS = np.array([20, 19, 18, 17])


def bleu_runs(levels, gain: float = 0.0, sentences: int = 300, seed: int = 0) -> list[np.ndarray]:
    """One ``(sentences, 10)`` array of BLEU statistics per level; the same ``seed`` gives the same sentence
    difficulties and the same noise for run j, so a positive ``gain`` makes run j better in every sentence."""
    difficulty = np.random.default_rng(seed).normal(0.0, 0.1, sentences)
    runs = []
    for j, level in enumerate(levels):
        noise = np.random.default_rng(1000 * seed + j + 1).normal(0.0, 0.05, sentences)
        p = np.clip(level + gain + difficulty + noise, 0.02, 0.98)
        correct = np.rint(TOTALS[None, :] * p[:, None] ** np.arange(1, 5)[None, :])
        lengths = np.full((sentences, 2), 20)
        runs.append(np.concatenate([lengths, correct, np.tile(TOTALS, (sentences, 1))], axis=1).astype(np.int64))
    return runs


def ppl_runs(levels, gain: float = 0.0, lines: int = 300, seed: int = 0) -> list[np.ndarray]:
    """Per-line ``[summed NLL, words]``: mean NLL per word ``level_j - gain`` plus shared line difficulty."""
    rng = np.random.default_rng(seed)
    words = rng.integers(5, 30, lines).astype(np.float64)
    difficulty = rng.normal(0.0, 0.3, lines)
    return [
        np.stack([(level - gain + difficulty + np.random.default_rng(j).normal(0, 0.1, lines)) * words, words], 1)
        for j, level in enumerate(levels)
    ]


# --- the statistics ------------------------------------------------------------------------------------------------
def test_vectorised_corpus_scores_equal_sacrebleus():
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(400):
        hyp, ref = rng.integers(0, 25, 2)
        total = np.maximum(hyp - np.arange(4), 0)
        correct = (total * rng.random(4) * (rng.random(4) > 0.25)).astype(int)
        rows.append([hyp, max(ref, 1), *correct, *total])
    rows += [[0, 5, 0, 0, 0, 0, 0, 0, 0, 0], [3, 5, 2, 1, 0, 0, 3, 2, 1, 0], [9, 4, 9, 8, 0, 6, 9, 8, 7, 6]]
    for metric in ("bleu_tok", "bleu"):
        for row in rows:
            assert stats.corpus_scores(np.asarray(row), metric) == pytest.approx(
                stats.corpus_score([row], metric), rel=1e-12, abs=1e-12
            ), row
    lines = ppl_runs([4.0])[0]
    assert stats.corpus_scores(lines.sum(0), "ppl") == pytest.approx(stats.corpus_score(lines, "ppl"), rel=1e-12)


def test_a_gain_in_every_sentence_but_swinging_seeds_is_significant_only_sentence_level():
    """(a) The row beats the baseline in every sentence of every seed, by about 1 BLEU, but the seeds' BLEU spans 7
    to 22: the sentence-level tests (seeds pooled) see thousands of consistent gains, the seed-aware test sees three
    runs against three."""
    levels = [0.35, 0.55, 0.45]
    system, baseline = bleu_runs(levels, gain=0.02), bleu_runs(levels)
    for s, b in zip(system, baseline, strict=True):
        assert (s[:, 2:6] >= b[:, 2:6]).all() and stats.corpus_score(s, "bleu") > stats.corpus_score(b, "bleu")
    result = seed_tests.compare_cells(system, baseline, "bleu")
    assert result.p_sentence < 0.01 and result.p_t_test < 0.01  # sentence-level: significant
    assert result.p_seed > 0.1  # seed-aware: not
    assert result.low < 0 < result.high and result.low < result.difference < result.high
    assert result.seed_test_note is None and result.runs == (3, 3)


def test_a_clear_gain_in_every_seed_is_significant_in_both():
    """(b) Seeds a few tenths of a BLEU point apart, a gain of several points: both tests agree."""
    system, baseline = bleu_runs([0.45, 0.455, 0.46], gain=0.05), bleu_runs([0.45, 0.455, 0.46])
    result = seed_tests.compare_cells(system, baseline, "bleu")
    assert result.p_seed < 0.01 and result.p_sentence < 0.01 and result.p_t_test < 0.01
    assert 0 < result.low < result.difference < result.high
    assert result.p_two_level == pytest.approx(1 / 10_001)  # the old bootstrap: not better in no resample
    assert result.df is not None and result.df > 2
    worse = seed_tests.compare_cells(baseline, system, "bleu")  # one-sided: the worse system gets p near 1
    assert worse.p_seed > 0.99 and worse.p_sentence > 0.99 and worse.p_t_test > 0.99


def test_welch_test_is_welchs_t_test_widened_by_the_test_sets_variance():
    """Without test-set variance the seed-aware test is Welch's t (scipy's statistic, one-sided) at Welch's 1947
    df, (a + b)² / (a²/(n_r + 1) + b²/(n_b + 1)) - 2, and the old test's form is scipy's Welch-Satterthwaite test;
    with a test-set variance v, Var gains v and the df grow by (Var / (a + b))^1.5, so runs that agree exactly leave
    a normal test of Δ / sqrt(v); p and the 95% interval agree (its lower end above 0 exactly when p < 0.025);
    lower perplexity is better; no p floor."""
    from scipy.special import stdtr
    from scipy.stats import norm, ttest_ind

    rng = np.random.default_rng(5)
    for n_r, n_b in ((2, 2), (3, 3), (3, 5), (5, 5)):
        for _ in range(20):
            r, b = rng.normal(30.3, 0.8, n_r), rng.normal(30.0, 0.5, n_b)
            scipy = ttest_ind(r, b, equal_var=False, alternative="greater")
            old = seed_tests.welch_test(r, b, 0.0, "bleu", "satterthwaite")
            assert old.p == pytest.approx(scipy.pvalue, rel=1e-9) and old.df == pytest.approx(scipy.df, rel=1e-9)
            va, vb = r.var(ddof=1) / n_r, b.var(ddof=1) / n_b
            df1947 = (va + vb) ** 2 / (va**2 / (n_r + 1) + vb**2 / (n_b + 1)) - 2
            test = seed_tests.welch_test(r, b, 0.0, "bleu")
            assert test.df == pytest.approx(df1947) and test.df > old.df
            assert test.p == pytest.approx(stdtr(df1947, -scipy.statistic), rel=1e-9)
            wider = seed_tests.welch_test(r, b, 0.09, "bleu")
            assert wider.df == pytest.approx(df1947 * ((va + vb + 0.09) / (va + vb)) ** 1.5)
            assert wider.high - wider.low > 0 and wider.se == pytest.approx(math.sqrt(va + vb + 0.09))
            assert (wider.low > 0) == (wider.p < 0.025) and (test.low > 0) == (test.p < 0.025)
            ppl = seed_tests.welch_test(-r, -b, 0.09, "ppl")  # lower is better: the same test, turned
            assert ppl.p == pytest.approx(wider.p) and ppl.high == pytest.approx(-wider.low)
    same = seed_tests.welch_test([30.5, 30.5, 30.5], [30.0, 30.0, 30.0], 0.04, "bleu")
    assert same.df == math.inf and same.p == pytest.approx(norm.sf(0.5 / 0.2))
    assert seed_tests.welch_test([33.0, 33.4], [30.0, 30.4], 0.0, "bleu").p < 0.01  # no floor at 2 v 2
    with pytest.raises(ValueError, match="two runs a side"):
        seed_tests.welch_test([30.0], [29.0, 29.5], 0.0, "bleu")


def test_the_shared_variance_is_the_test_sets_variance_less_each_runs_own_noise():
    """v_shared from the jackknife's two-way decomposition: with runs that differ from their system's mean only by
    independent sentence noise (no system x sentence interaction), v_pooled is that noise's share (own_r/(N n_r) +
    own_b/(N n_b)) and v_shared about 0; a system x sentence interaction shared by a system's runs shows in
    v_shared, at its size; the pseudo-values' mean is the run's score (BLEU's to 0.01) and their variance / N the
    jackknife's variance of it, about the paired bootstrap's."""
    rng = np.random.default_rng(0)
    size = 400
    difficulty = rng.normal(0.0, 5.0, size)
    own = rng.normal(0.0, 3.0, (2, 5, size))  # (systems, runs, sentences)
    lines = rng.integers(5, 30, size).astype(np.float64)
    for shared_sd in (0.0, 2.0):
        interaction = rng.normal(0.0, shared_sd, (2, 1, size))
        psi = 100.0 + difficulty + own + interaction  # perplexity-like per-word values, additive
        pooled, own_r, own_b = seed_tests.variance_arrays(psi[0], psi[1])
        assert own_r == pytest.approx(9.0 / (size * 5), rel=0.1) and own_b == pytest.approx(9.0 / (size * 5), rel=0.1)
        shared = pooled - own_r - own_b
        assert shared == pytest.approx(2 * shared_sd**2 / size, abs=0.003)
    runs = bleu_runs([0.40, 0.45, 0.5], sentences=300)
    psi = seed_tests.pseudo_values(runs, "bleu")
    assert psi.shape == (3, 300)
    assert np.allclose(psi.mean(axis=1), seed_tests.run_scores(runs, "bleu"), atol=0.01)
    lm = [np.stack([(4.7 + rng.normal(0, 0.3, size)) * lines, lines], 1) for _ in range(2)]
    jackknife = seed_tests.pseudo_values(lm, "ppl").var(axis=1, ddof=1) / size
    _, pooled = seed_tests.both_bootstraps(lm[:1], lm[1:], "ppl", seed_tests.Resampling(4000))
    parts = seed_tests.variance_parts(lm[:1], lm[1:], "ppl")
    assert parts.pooled == pytest.approx(np.var(pooled, ddof=1), rel=0.08) and parts.own == (0.0, 0.0)
    difference = seed_tests.pseudo_values(lm[:1], "ppl")[0] - seed_tests.pseudo_values(lm[1:], "ppl")[0]
    assert parts.pooled == pytest.approx(np.var(difference, ddof=1) / size)
    assert parts.pooled == pytest.approx(jackknife.sum(), rel=0.1)  # independent runs: the two variances add


@pytest.mark.parametrize(
    ("runs", "p", "marker"),
    [
        ((3, 3), 0.009, "‡"),
        ((2, 2), 0.009, "†"),
        ((2, 5), 0.001, "†"),
        ((5, 2), 0.001, "†"),
        ((3, 5), 0.03, "†"),
        ((2, 2), 0.06, ""),
        ((5, 5), 0.0001, "‡"),
    ],
)
def test_a_double_dagger_needs_three_runs_a_side(runs, p, marker):
    """At 2 v 2 the seed-aware test rejects above 0.01 at nominal 0.01 (docs/reproducing.md's calibration), so a
    p < 0.01 with 2 runs on either side earns † only; 0.05 holds at 2 v 2."""
    comparison = seed_tests.Comparison(0.5, runs, p_t_test=0.5, p_sentence=0.5, p_seed=p, low=0.1, high=0.9, df=3.0)
    cell = Cell(row=None, column=None, expected=runs[0], score=seed_tests.CellScore([1.0] * runs[0], comparison))
    assert seed_marker(cell) == marker


def test_perplexity_is_resampled_from_the_lines_and_lower_is_better():
    better, base = ppl_runs([4.70, 4.72, 4.74], gain=0.1), ppl_runs([4.70, 4.72, 4.74])
    result = seed_tests.compare_cells(better, base, "ppl")
    assert result.difference < 0 and result.high < 0  # lower perplexity
    assert result.p_seed < 0.01 and result.p_sentence < 0.01 and result.p_t_test < 0.01
    assert seed_tests.compare_cells(base, better, "ppl").p_seed > 0.99
    swinging = seed_tests.compare_cells(ppl_runs([4.2, 5.2, 4.7], 0.05), ppl_runs([4.2, 5.2, 4.7]), "ppl")
    assert swinging.p_sentence < 0.01 and swinging.p_seed > 0.1


def test_one_run_gets_no_seed_aware_test_and_the_resamples_are_fixed():
    system, baseline = bleu_runs([0.45], gain=0.05), bleu_runs([0.45, 0.5, 0.4])
    one = seed_tests.compare_cells(system, baseline, "bleu")
    assert (one.p_seed, one.low, one.high, one.seed_test_note) == (None, None, None, "n/a (1 run)")
    assert one.p_t_test < 0.01 and one.p_sentence < 0.01  # still computed, as sentence-level
    assert seed_tests.compare_cells(baseline, system, "bleu").seed_test_note == "n/a (baseline: 1 run)"
    again_runs = (bleu_runs([0.4, 0.5], 0.01), bleu_runs([0.4, 0.5]))
    again = seed_tests.compare_cells(*again_runs, "bleu")
    assert again == seed_tests.compare_cells(bleu_runs([0.4, 0.5], 0.01), bleu_runs([0.4, 0.5]), "bleu")
    other = seed_tests.compare_cells(
        bleu_runs([0.4, 0.5], 0.01), bleu_runs([0.4, 0.5]), "bleu", seed_tests.Resampling(seed=7)
    )
    assert other.p_seed == again.p_seed  # v_shared is the jackknife's: no resamples
    assert other.p_two_level != again.p_two_level and abs(other.p_two_level - again.p_two_level) < 0.02
    old = [seed_tests.compare_cells(*again_runs, "bleu", r, seed_test="v_sent") for r in (Resampling(), Resampling(7))]
    assert old[0].p_seed != old[1].p_seed and abs(old[0].p_seed - old[1].p_seed) < 0.02  # the old test's v_sent
    assert seed_tests.Resampling().mc_error(0.05) < 0.005 and seed_tests.Resampling(1_900).mc_error(
        0.05
    ) == pytest.approx(0.005)
    with pytest.raises(InputError, match="at least 1,900"):
        TableSettings(seed_tests.Resampling(1000))


def test_power_counts_the_seeds_that_detect_an_effect():
    z = 1.6448536269514722 + 0.8416212335729143
    assert power.seeds_for_power(1.0, 1.0) == math.ceil(2 * z**2) == 13
    assert power.seeds_for_power(0.5, 1.0) == 4 and power.seeds_for_power(0.1, 5.0) == 2
    assert power.seeds_for_power(1.0, 0.0) is None and power.seeds_for_power(1.0, -0.3) is None
    sd, df = power.pooled_sd([[1.0, 2.0, 3.0], [5.0, 5.0], [7.0]])
    assert df == 3 and sd == pytest.approx(math.sqrt((2 * 1.0 + 0.0) / 3))
    assert power.pooled_sd([[1.0], [2.0]]) is None


def test_code_versions_count_commits_or_source_hashes():
    a, b = {"commit": "c1", "source_hash": "h1"}, {"commit": "c2", "source_hash": "h2"}
    assert code_versions([a, b]) == "2 commits"
    assert code_versions([a, {"commit": "c1", "source_hash": "h3", "dirty": True}]) == "2 source hashes"
    assert code_versions([a, {"commit": "c1"}]) == "2 source hashes"  # unpinned beside pinned: another code


# --- tables from synthetic records ---------------------------------------------------------------------------------
SMOKE3 = {"baseline": [0.40, 0.42], "mean_residual": [0.41, 0.43], "self_attentive_content": [0.58, 0.60]}


@pytest.fixture(scope="module")
def digests() -> dict:
    """Smoke Table 3's jobs (3 rows x 2 seeds, En-De, NIST BLEU on nt14-16) and their config hashes."""
    jobs = plan_jobs([load_table(3)], load_scale("smoke"))
    settings = JobSettings(Path("/nonexistent"), Path("/nonexistent"))
    return {job.id: (job, job_config(job, settings)[1]) for job in jobs}


def write_records(results: Path, digests: dict, code=None, skip=()) -> dict[str, Path]:
    """A record and its sentence statistics per job; ``code(job)`` gives the record's code fields (default: one
    pinned commit)."""
    paths = {}
    settings = JobSettings(Path("/nonexistent"), results)
    for job_id, (job, digest) in digests.items():
        if job_id in skip:
            continue
        level = SMOKE3[job.row][job.seed - 1]
        runs = {test: bleu_runs([level], sentences=80, seed=k)[0] for k, test in enumerate(sorted(job.tests))}
        path = settings.record_path(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(f"{job.id}.sentences.json.gz").write_bytes(
            gzip_bytes(json.dumps({t: {"bleu": r.tolist()} for t, r in runs.items()}).encode())
        )
        fields = {"commit": "c" * 40, "dirty": False, "source_hash": "a" * 64, "allow_dirty": False}
        record = {
            "version": 1,
            "job": job.id,
            "scale": "smoke",
            "pair": job.pair,
            "row": job.row,
            "seed": job.seed,
            "config_hash": digest,
            "parameters": 1000,
            "finished": "now",
            "hardware": {"cpu": "test"},
            "wall_seconds": {"total": 1.0},
            "tests": {t: {"scores": {"bleu": {"score": stats.corpus_score(r, "bleu")}}} for t, r in runs.items()},
            **(code(job) if code else fields),
        }
        write_json(path, record)
        paths[job.id] = path
    return paths


def render3(results: Path, **settings) -> tuple[str, dict[str, str], list[str]]:
    """Smoke Table 3: the Markdown, its rows by label, its CSV lines."""
    text = render_tables(
        [3], "smoke", results, write=True, plot=False, out=open(os.devnull, "w"), settings=TableSettings(**settings)
    )[3]
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    return text, rows, (results / "tables" / "table3.csv").read_text().splitlines()


def test_pinned_cells_show_the_seed_aware_markers_intervals_and_a_footer_that_names_the_test(digests, tmp_path):
    write_records(tmp_path, digests)
    text, rows, csv_lines = render3(tmp_path)
    row = rows["+ Self-attentive residual connections"]
    cell, delta = row.split("|")[3].strip(), row.split("|")[4].strip()
    # p_seed < 0.01 at 2 v 2 (the CSV below), but ‡ needs seed_tests.RUNS_FOR_P01 runs a side: † it is
    assert cell.endswith(" (2)") and "†" in cell and "‡" not in cell and "unpinned" not in row and "mixed" not in row
    low, high = (float(x) for x in delta.split("[")[1].rstrip("]").split(", "))
    assert 0 < low < high
    assert "| baseline |" in rows["NMT baseline"]
    for phrase in (
        "Every test is one-sided",
        "Welch's test on the seed means with the test set's shared variance added (Welch 1947;",
        "Koehn 2004 and Clark et al. 2011",
        "Var = s_r²/n_r + s_b²/n_b + v_shared",
        "two-way decomposition, runs x sentences, of each run's jackknife pseudo-values",
        "10,000 resamples, numpy PCG64, generator seed 12345",
        "the upper tail of Student's t",
        "docs/reproducing.md#calibration-of-the-seed-aware-test",
        "so ‡ needs 3 or more runs a side and p < 0.01 with fewer prints †",
        "p_two_level",
        "p_seed_v_sent",
        "sentence-level with seeds pooled",
        "Power, simulated (20,000 draws of the seed-aware test itself",
        "NT14 (seed sd ",
        "+ Self-attentive residual connections at 2 v 2 detects Δ +",
        "Every difference from the paper (sizes, vocabulary, initialisation",
        "docs/reproducing.md#every-difference-from-the-paper",
    ):
        assert phrase in text, phrase
    assert "allow_mixed_code" not in text and "Unpinned" not in text and "cap reached" not in text.lower()
    header = csv_lines[0].split(",")
    for name in ("mean", "sd", "n", "diff_lo", "diff_hi", "p_seed", "seed_df", "p_two_level", "p_t", "cap_reached"):
        assert name in header, name
    sac = dict(zip(header, next(r for r in csv_lines if ",self_attentive_content,nt14," in r).split(","), strict=True))
    assert sac["n"] == "2" and sac["code"] == "pinned" and float(sac["p_seed"]) < 0.01 and sac["resamples"] == "10000"
    assert sac["seed_test"] == "Welch + shared test-set variance" and float(sac["seed_df"]) > 1
    assert sac["cap_reached"] == "0" and sac["ran"] == "" and sac["paper_column"] == "NT14"
    assert float(sac["p_two_level"]) < float(sac["p_seed"])  # the old bootstrap, kept in the CSV, is the bolder
    assert float(sac["p_seed"]) <= float(sac["p_seed_v_sent"])  # v_sent counts the runs' own noise twice


def test_runs_that_reached_their_epoch_cap_are_flagged_in_the_cell_and_counted_in_the_footer(digests, tmp_path):
    """A run whose patience rule never fired (stopped_early false), or whose selected checkpoint is its last
    update, is "cap reached": averaged, flagged in its cell, counted in the footer and the CSV; a run that stopped
    early on an earlier checkpoint is not."""
    from sarnmt.sweep.cells import cap_reached

    def code(job):
        fields = {"commit": "c" * 40, "dirty": False, "source_hash": "a" * 64, "allow_dirty": False}
        last = {"steps": 904, "epochs": 8, "stopped_early": False}
        selected = "epoch007-step000900-cost36.913.ckpt"
        if job.row == "baseline" and job.seed == 2:  # stopped early, best checkpoint 400 updates before
            last, selected = {"steps": 1300, "epochs": 12, "stopped_early": True}, "epoch008-step000900-cost30.1.ckpt"
        elif job.row == "mean_residual":
            last = {"steps": 900, "epochs": 8, "stopped_early": True}  # "stopped", but on its last checkpoint
        elif job.row != "baseline":
            last, selected = {"steps": 1300, "epochs": 12, "stopped_early": True}, "epoch008-step000900-c.ckpt"
        return {**fields, **last, "selected_checkpoint": {"file": selected, "monitor": "val/loss", "score": 1.0}}

    write_records(tmp_path, digests, code)
    text, rows, csv_lines = render3(tmp_path)
    assert rows["NMT baseline"].count("(2); 1 cap reached |") == 3
    assert rows["+ Mean residual connections"].count("(2); 2 cap reached |") == 3
    assert "cap reached" not in rows["+ Self-attentive residual connections"]
    assert "Cap reached: 3 of 6 runs ended at their epoch cap without the patience rule firing" in text
    header = csv_lines[0].split(",")
    mean = dict(zip(header, next(r for r in csv_lines if ",mean_residual,nt16," in r).split(","), strict=True))
    assert mean["cap_reached"] == "2" and mean["n"] == "2"
    assert not cap_reached({"job": "old"}) and cap_reached({"stopped_early": False})


def test_a_cell_of_two_commits_is_mixed_code_and_not_averaged(digests, tmp_path):
    """(c) The mean residual row's seeds ran from two commits: its cells say so and hold no mean, unless
    allow_mixed_code=true, which the footer then states."""

    def code(job):
        second = job.row == "mean_residual" and job.seed == 2
        return {
            "commit": ("d" if second else "c") * 40,
            "dirty": False,
            "source_hash": ("b" if second else "a") * 64,
            "allow_dirty": False,
        }

    write_records(tmp_path, digests, code)
    text, rows, csv_lines = render3(tmp_path)
    row = rows["+ Mean residual connections"]
    assert row.count("| mixed code: 2 commits, 2 runs | — |") == 3 and "±" not in row
    assert "Mixed code, not averaged: + Mean residual connections / NT14: 2 commits (seed 1: cccccccccc" in text
    assert "allow_mixed_code" not in text
    mixed = next(r for r in csv_lines if ",mean_residual,nt14," in r)
    assert ",mixed code: 2 commits," in mixed and ",,," in mixed  # no mean, no sd
    text, rows, _ = render3(tmp_path, allow_mixed_code=True)
    assert "± " in rows["+ Mean residual connections"] and "mixed code averaged: 2 commits" in text
    assert "Runs of different code averaged: allow_mixed_code=true (3 cells)." in text


def test_unpinned_and_dirty_runs_are_counted_and_averaged_and_one_run_is_na(digests, tmp_path):
    """Records from before pinning (no source hash) are averaged and counted as unpinned; a dirty run is counted;
    a cell left with one run shows the seed-aware test as n/a (1 run), never the sentence-level marker instead."""

    def code(job):
        if job.row == "baseline":
            return {"commit": "e" * 40, "dirty": job.seed == 1}  # the old records' fields only
        return {"commit": "c" * 40, "dirty": False, "source_hash": "a" * 64, "allow_dirty": False}

    write_records(tmp_path, digests, code, skip={"en_de.self_attentive_content.s2"})
    text, rows, _ = render3(tmp_path)
    base = rows["NMT baseline"]
    assert base.count("(2); 2 unpinned; 1 dirty |") == 3 and "mixed" not in base
    assert "Unpinned: 2 of 5 runs have no source hash" in text and "Dirty: 1 runs" in text
    one = rows["+ Self-attentive residual connections"]
    assert one.count("(1 of 2 seeds); 1 not run |") == 3 and one.count(", n/a (1 run) |") == 3
    assert "‡" not in one and "†" not in one and "**" in one  # the t-test's markers, labelled in the footer


@pytest.mark.parametrize("damage", ["nan score", "no statistics file", "no statistics entry", "nan statistics"])
def test_a_nan_score_or_missing_statistics_counts_the_record_as_broken_naming_it(digests, tmp_path, damage):
    """A NaN score, or statistics missing or not finite: the record is named and counted as broken in its cells,
    and the table is still rendered."""
    paths = write_records(tmp_path, digests)
    path = paths["en_de.mean_residual.s2"]
    sentences = path.with_name("en_de.mean_residual.s2.sentences.json.gz")
    if damage == "nan score":
        record = json.loads(path.read_text())
        record["tests"]["nt15"]["scores"]["bleu"]["score"] = float("nan")
        path.write_text(json.dumps(record))
    elif damage == "no statistics file":
        sentences.unlink()
    else:
        table = {"nt14": {"bleu_tok": [[1] * 10]}} if damage == "no statistics entry" else None
        if table is None:
            table = {t: {"bleu": [[float("nan")] * 10] * 80} for t in ("nt14", "nt15", "nt16")}
        sentences.write_bytes(gzip_bytes(json.dumps(table).encode()))
    text, rows, csv_lines = render3(tmp_path)
    assert rows["+ Mean residual connections"].count("(1 of 2 seeds); 1 broken") == 3
    assert f"Not counted: {path}" in text or f"Not counted: record {path}" in text
    header = csv_lines[0].split(",")
    nt15 = dict(zip(header, next(r for r in csv_lines if ",mean_residual,nt15," in r).split(","), strict=True))
    assert nt15["broken"] == "1" and nt15["n"] == "1"


def test_the_tables_command_counts_a_nan_record_and_refuses_too_few_resamples_in_one_line(digests, tmp_path, capsys):
    paths = write_records(tmp_path, digests)
    args = ["table=3", "scale=smoke", f"results_dir={tmp_path}", "plot=false", "write=false"]
    outcome = run_cli(capsys, "tables", [*args, "allow_mixed_code=true", "significance.seed=3"])
    assert outcome.code == 0 and "allow_mixed_code=true (no cell had runs of different code)" in outcome.out
    assert "generator seed 3)" in outcome.out
    assert "at least 1,900" in one_error(run_cli(capsys, "tables", [*args, "significance.resamples=1000"]))
    record = json.loads(paths["en_de.baseline.s1"].read_text())
    record["tests"]["nt14"]["scores"]["bleu"]["score"] = float("nan")
    paths["en_de.baseline.s1"].write_text(json.dumps(record))
    outcome = run_cli(capsys, "tables", args)
    assert outcome.code == 0 and "Traceback" not in outcome.err, outcome.err
    reason = f"- Not counted: record {paths['en_de.baseline.s1']}: its bleu score on test set 'nt14' is nan"
    assert reason in outcome.out


@pytest.mark.parametrize("damage", ["score moved", "negative count"])
def test_a_record_whose_statistics_do_not_give_its_score_is_corrupt_and_left_out(digests, tmp_path, damage, caplog):
    """Statistics that give a score more than 0.01 from the recorded one, or hold a negative count, are
    another run's (or no run's): the record is named as corrupt, left out, and counted in its cell."""
    paths = write_records(tmp_path, digests)
    path = paths["en_de.mean_residual.s2"]
    if damage == "score moved":
        record = json.loads(path.read_text())
        record["tests"]["nt15"]["scores"]["bleu"]["score"] += 0.02
        path.write_text(json.dumps(record))
    else:
        sentences = path.with_name("en_de.mean_residual.s2.sentences.json.gz")
        table = json.loads(gzip.decompress(sentences.read_bytes()))
        table["nt15"]["bleu"][3][2] = -1
        sentences.write_bytes(gzip_bytes(json.dumps(table).encode()))
    with caplog.at_level(logging.WARNING, logger="sarnmt"):
        text, rows, csv_lines = render3(tmp_path)
    row = rows["+ Mean residual connections"].split("|")
    assert "(1 of 2 seeds); 1 corrupt" in row[6] and "corrupt" not in row[3] + row[9]  # nt15 only
    reason = "give" if damage == "score moved" else "1 negative counts"
    assert f"Not counted: {path}: corrupt: " in text and reason in text.split(f"{path}: corrupt: ")[1].split("\n")[0]
    assert any(str(path) in r.getMessage() and "corrupt" in r.getMessage() for r in caplog.records)
    header = csv_lines[0].split(",")
    nt15 = dict(zip(header, next(r for r in csv_lines if ",mean_residual,nt15," in r).split(","), strict=True))
    assert nt15["corrupt"] == "1" and nt15["n"] == "1" and nt15["missing"] == "0"


def test_a_recorded_score_within_a_hundredth_of_its_statistics_is_counted(digests, tmp_path):
    paths = write_records(tmp_path, digests)
    path = paths["en_de.mean_residual.s2"]
    record = json.loads(path.read_text())
    record["tests"]["nt15"]["scores"]["bleu"]["score"] = round(record["tests"]["nt15"]["scores"]["bleu"]["score"], 2)
    path.write_text(json.dumps(record))
    text, rows, _ = render3(tmp_path)
    assert "corrupt" not in text and rows["+ Mean residual connections"].count("(2)") == 3


def test_baseline_compares_every_row_with_another_row_in_files_of_their_own(digests, tmp_path, capsys):
    """``baseline=mean_residual``: the self-attentive residual row is tested against the mean residual row (an
    ordering the paper claims), in ``table3.vs-mean_residual.*``; the table's own files are not written, the
    footer names the row, and a row the table lacks is a one-line error that lists its rows."""
    write_records(tmp_path, digests)
    text = render_tables([3], "smoke", tmp_path, plot=False, out=open(os.devnull, "w"), baseline="mean_residual")[3]
    assert sorted(p.name for p in (tmp_path / "tables").iterdir()) == [
        f"table3.vs-mean_residual.{ext}" for ext in ("csv", "md", "tex")
    ]
    rows = {line.split("|")[1].strip(): line for line in text.splitlines() if line.startswith("| ")}
    assert "| baseline |" in rows["+ Mean residual connections"] and "| baseline |" not in rows["NMT baseline"]
    sac = [c.strip() for c in rows["+ Self-attentive residual connections"].split("|")]
    base = [c.strip() for c in rows["NMT baseline"].split("|")]
    assert "†" in sac[3] and sac[4].startswith("+") and base[4].startswith("-") and "†" not in base[3]
    assert (
        text.startswith("**Table 3: ")
        and (
            ", against + Mean residual connections (NT14, NT15, NT16: the same runs on one test set)** — scale `smoke`"
        )
        in text
    )
    assert (
        "Baseline: every test, Δ and power line compares a row with + Mean residual connections "
        "(baseline=mean_residual), not with the table's NMT baseline row" in text
    )
    table = load_table(3)
    assert table.compared_with("mean_residual").compared_with("baseline") == table and table.stem == "table3"
    render3(tmp_path)  # without baseline=: the table and, beside it, the table against each row of also_against
    assert table.also_against == ("mean_residual",)
    assert {p.name for p in (tmp_path / "tables").iterdir()} >= {"table3.md", "table3.vs-mean_residual.md"}
    args = ["table=3", "scale=smoke", f"results_dir={tmp_path}", "plot=false", "write=false", "baseline=memory_rnn"]
    line = one_error(run_cli(capsys, "tables", args))
    assert "table 3 has no row 'memory_rnn'" in line and "'self_attentive_content'" in line


# --- bad input: two precisions in a cell; names of what ran ---------------------------------------------------------
def test_a_run_of_another_precision_is_refused_in_one_line_naming_both(digests, tmp_path):
    """A record of the cell's job trained in bf16 where the sweep's config trains in fp32 has another config hash:
    it is counted as stale, never averaged, and its one line under the table names both precisions."""
    write_records(tmp_path, digests)
    job, _ = digests["en_de.mean_residual.s2"]
    cfg, digest = job_config(
        replace(job, train=(*job.train, "trainer.precision=bf16-mixed")), JobSettings(Path("/x"), tmp_path)
    )
    path = tmp_path / "records" / "en_de.mean_residual.s2.json"
    record = json.loads(path.read_text())
    write_json(path, {**record, "config_hash": digest, "config": OmegaConf.to_container(cfg, resolve=True)})
    text, rows, _ = render3(tmp_path)
    assert rows["+ Mean residual connections"].count("(1 of 2 seeds); 1 stale |") == 3
    lines = [line for line in text.splitlines() if "en_de.mean_residual.s2.json" in line]
    assert len(lines) == 1 and lines[0].startswith("- Not counted: record ")
    assert "; it differs in trainer.precision bf16-mixed, the sweep's 32-true." in lines[0]


def test_columns_are_named_by_what_ran_and_the_papers_column_apart():
    """At mini a corpus stands in for the paper's: Table 1's En-Zh column is Multi30K En→De test2016, its paper
    column is labelled ``paper: En-Zh``; Tables 2 and 3 say their columns are one set of runs on several test sets;
    the paper scale keeps the paper's names."""
    mini, paper = load_scale("mini"), load_scale("paper")
    one, two, three = load_table(1), load_table(2), load_table(3)
    assert [column_names(one, mini, c) for c in one.columns] == [
        ("Multi30K En→De test2016", "paper: En-Zh"),
        ("Multi30K De→En test2016", "paper: Es-En"),
    ]
    assert [column_names(one, paper, c) for c in one.columns] == [
        ("En-Zh (en_zh)", "paper"),
        ("Es-En (es_en)", "paper"),
    ]
    assert heading(one, mini) == one.title
    assert heading(two, mini) == two.title + " (Multi30K En→De test2016, test2017: the same runs on 2 test sets)"
    assert heading(three, mini).endswith(" (Multi30K En→De test2016, test2017, test2018: the same runs on 3 test sets)")
    assert heading(two, paper) == two.title + " (NT14, NT15: the same runs on 2 test sets)"
    assert (
        mini.ran("lm_text", "test") == "mini English text newstest2011"
        and load_scale("mini8").ran("en_de", "nt14") is None
    )


def test_the_footers_links_are_headings_of_the_docs():
    """The footers link the calibration, the simulated power and the deviation table by their headings'
    anchors in docs/reproducing.md (MkDocs' slugs)."""
    import re

    from sarnmt.sweep import footer

    text = (Path(__file__).resolve().parents[1] / "docs" / "reproducing.md").read_text(encoding="utf-8")
    slugs = {
        re.sub(r"\s+", "-", re.sub(r"[^\w\s-]", "", h.lower()).strip()) for h in re.findall(r"^#+ (.+)$", text, re.M)
    }
    for link in (footer.CALIBRATION, footer.POWER_DOCS, footer.DEVIATIONS):
        assert link.startswith("docs/reproducing.md#") and link.split("#")[1] in slugs, link


def test_the_superseded_mini8_tables_render_as_published(tmp_path):
    """The superseded mini8 records stay where they are and render with the test they were published with (the
    scale's ``seed_test: v_sent``): every cell of the committed CSV, p and interval included, comes out again."""
    import csv
    import shutil

    root = Path(__file__).resolve().parents[1] / "sweeps" / "results" / "mini8"
    shutil.copytree(root / "records", tmp_path / "records")
    render_tables([6], "mini8", tmp_path, plot=False, out=open(os.devnull, "w"))
    for name in ("table6.csv", "table6.vs-lm_4gram.csv"):
        published = list(csv.DictReader((root / "tables" / name).open(encoding="utf-8")))
        again = list(csv.DictReader((tmp_path / "tables" / name).open(encoding="utf-8")))
        assert len(again) == len(published)
        for new, old in zip(again, published, strict=True):
            assert {k: new[k] for k in old if k != "commits"} == {k: v for k, v in old.items() if k != "commits"}
