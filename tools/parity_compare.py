"""How tools/tier_parity.py judges a cross-check: the harness's figures against the plain
process's, point by point, and the report (issue #29).

Each side is ``{(subject, B): {tier: [µs per repeat]}}``; its figure at a point is the median of its
repeats. :func:`judged` makes every comparison of a report from the two sides' figures alone, so a
recorded ``tier_parity.json`` can be judged again by a later version (:func:`rejudge`, ``python -m
tools.tier_parity --rejudge``) without measuring anything:

* :func:`compare`: each tier's ratio against its target (:data:`TARGETS`), and whether the two
  sides' ranges meet;
* :func:`compare_host`: the host beside the sync tier, with no target (:data:`HOST`, :data:`PROBE`);
* :func:`compare_at_full_speed`: the sync tier on the trials (or repeats) that ran at the host's
  full speed;
* :func:`slow_trials`: how often each side's host read slow, over the points both sides measured;
* :func:`compare_contest_trials`: the contest tier's trials apart on both sides (where a miss is one
  placement draw);
* :func:`repeatability`: how often each side agrees with itself, its repeats split in two halves
  and judged by the same targets: the yardstick a harness / plain ratio is read against;
* :func:`paired_counts` and :func:`paired_p`: that yardstick as a paired test, the harness and the plain
  timer's odd repeats each judged against the plain timer's even repeats, point by point;
* :func:`machine_speed`: how often a stand-in pinned to one CPU read slow while each side ran
  (measured by ``tools/tier_parity.py --speed-log``; recorded, not judged again).
"""

from __future__ import annotations

import json
import statistics
from datetime import datetime, timezone
from pathlib import Path

from scipy.stats import binomtest

from harness.facts import Tier
from harness.records.store import read_stored
from harness.run_lock import writing_into

#: The largest |harness / plain - 1| each tier may show (issue #29).
TARGETS = {Tier.CUPTI: 0.02, Tier.CONTEST: 0.02, Tier.EVENTS: 0.10, Tier.SYNC: 0.15}
#: The key of a point's host-time diagnostic beside its tiers: the host time of one call (µs), as the
#: sync tier measures it after each trial's timed loop (``harness.judge.timing.sync.bench_sync``'s
#: ``host_call_us``: the untimed call on the trial's own arguments, timed with ``time.perf_counter``,
#: the median over the trials). No target: it says whether a sync-tier gap is the host's path to the
#: launch (docs/timing.md, "What a Python launch's host time holds").
HOST = "host"
#: The key of a point's host-speed diagnostic: the sync tier's ``host_probe_us`` (µs of a fixed
#: pure-Python stand-in beside each trial, ``harness.judge.timing.host_speed``), the same reading on
#: both sides. No target: where the two sides' readings differ, their hosts ran at different speeds,
#: and a sync gap of a Python launch follows (results/proof/20261127-H100-host-path-6470d35).
PROBE = "host_probe"
#: A repeat ran at the host's full speed when its :data:`PROBE` reading is at most this factor times the
#: fastest reading of the whole cross-check (both sides). On these machines the stand-in reads 6-7.6 µs at
#: full speed and 10-14 µs while a vCPU runs slow, with little between (results/proof/20261127-H100-host-path-6470d35,
#: whose cpu_speed.py calls a block slow above 1.3x the fastest; results/proof/20261127-H100-parity-speed-7bf32b9).
FULL_SPEED_FACTOR = 1.3
#: The keys of a point's sync trials, each apart (µs, in order, over the repeats): each trial's mean
#: (the trace's ``trial_means_us``; the plain loop's ``time_runnable``) and the host's speed reading
#: beside it (``host_probe_trials_us``). A repeat holds three trials, so a trial is the finer unit to
#: tell a slow host by (:func:`compare_at_full_speed`).
TRIAL_MEANS, TRIAL_PROBES = "sync_trials", "host_probe_trials"
#: The key of a point's contest trials, each apart (µs, in order, over the repeats): each trial's median
#: (the trace's ``trial_medians_us``; the plain side's FlashInfer timer per trial). Each trial times one
#: argument set, so its spread is where the buffers lie: a contest figure outside its target is read
#: beside it (:func:`compare_contest_trials`).
CONTEST_TRIAL_MEDIANS = "contest_trials"


def ranges_meet(ours: list[float], theirs: list[float], target: float) -> bool:
    """Whether ``ours``' min-max and ``theirs``' widened by ``target`` (a fraction) overlap."""
    return min(ours) <= max(theirs) * (1 + target) and max(ours) >= min(theirs) * (1 - target)


def compare(harness: dict, plain: dict) -> list[dict]:
    """One row per (subject, B, tier) both sides measured. Each side is ``{(subject, B): {tier: [µs per
    repeat]}}`` and its figure is the median of its repeats. Each row holds: both figures (µs), their
    ratio, whether it is within the tier's target, each side's min and max, and whether the two ranges
    meet once the plain one is widened by the target (``within_spread``). The named timers' own
    run-to-run spread exceeds some targets (results/proof/20261126-H200-timers), and so does the
    harness's sync tier's, so a ratio outside its target is read beside it."""
    rows = []
    for key in sorted(set(harness) & set(plain)):
        for tier, target in TARGETS.items():
            ours, repeats = harness[key].get(tier, []), plain[key].get(tier, [])
            if not ours or not repeats or min(repeats) <= 0:
                continue
            mine, theirs = statistics.median(ours), statistics.median(repeats)
            ratio = mine / theirs
            low, high = min(repeats), max(repeats)
            rows.append({"subject": key[0], "batch_size": key[1], "tier": str(tier), "harness_us": mine,
                         "plain_us": theirs, "ratio": ratio, "target": target, "within": abs(ratio - 1) <= target,
                         "harness_repeats": len(ours), "harness_min_us": min(ours), "harness_max_us": max(ours),
                         "plain_repeats": len(repeats), "plain_min_us": low, "plain_max_us": high,
                         "within_spread": ranges_meet(ours, repeats, target)})
    return rows


def compare_host(harness: dict, plain: dict) -> list[dict]:
    """One row per (subject, B) where both sides have :data:`HOST` or :data:`PROBE`: each side's
    median host time of one call (µs) and their ratio, and each side's median host-speed reading
    (µs of the stand-in) and theirs; None where a side lacks one. A diagnostic beside the sync
    rows, with no target: where the host ratio follows the sync ratio, the sync gap is the host's
    path to the launch; where the probe ratio does too, the host ran at another speed."""
    rows = []
    for key in sorted(set(harness) & set(plain)):
        row = {"subject": key[0], "batch_size": key[1]}
        for name, field in (("host", HOST), ("probe", PROBE)):
            ours, theirs = harness[key].get(field, []), plain[key].get(field, [])
            both = bool(ours and theirs) and statistics.median(theirs) > 0
            mine, other = (statistics.median(ours), statistics.median(theirs)) if both else (None, None)
            row |= {f"harness_{name}_us": mine, f"plain_{name}_us": other,
                    f"{name}_ratio": mine / other if both else None}
        if row["host_ratio"] is not None or row["probe_ratio"] is not None:
            rows.append(row | {"harness_repeats": len(harness[key].get(HOST, [])),
                               "plain_repeats": len(plain[key].get(HOST, []))})
    return rows


def compare_at_full_speed(harness: dict, plain: dict) -> list[dict]:
    """The sync tier compared where the host ran at full speed: one row per (subject, B) both sides
    timed, with each side's trials (where both sides recorded each trial: :data:`TRIAL_MEANS`,
    :data:`TRIAL_PROBES`) or else repeats (:data:`PROBE`) whose speed reading is within
    :data:`FULL_SPEED_FACTOR` of the fastest reading of the cross-check, the median of their sync
    figures (µs; None where a side has none such), the ratio and whether it is within the sync
    target (None where it cannot be judged). Why: for a Python launch at small B the sync tier times
    the host's launch path, and a vCPU's slow episode doubles it on either side, whichever timer
    runs (results/proof/20261127-H100-parity-speed-7bf32b9: in all 10 pairs of repeats whose
    readings differed in mode, the slow one read the higher sync figure). Beside :func:`compare`'s
    sync rows, never instead of them. A figure counts only where it has its own reading."""
    limit = full_speed_limit(harness, plain)
    if limit is None:
        return []
    rows = []
    for key in sorted(set(harness) & set(plain)):
        if not harness[key].get(Tier.SYNC) or not plain[key].get(Tier.SYNC):
            continue
        unit = "trials" if all(paired(side[key], TRIAL_MEANS, TRIAL_PROBES) for side in (harness, plain)) else "repeats"
        mine, theirs = (at_full_speed(side[key], limit, unit) for side in (harness, plain))
        ours, other = (statistics.median(mine) if mine else None), (statistics.median(theirs) if theirs else None)
        ratio = ours / other if ours is not None and other else None
        rows.append({"subject": key[0], "batch_size": key[1], "limit_us": limit, "unit": unit, "harness_us": ours,
                     "plain_us": other, "harness_count": len(mine), "plain_count": len(theirs), "ratio": ratio,
                     "within": None if ratio is None else abs(ratio - 1) <= TARGETS[Tier.SYNC]})
    return rows


def compare_contest_trials(harness: dict, plain: dict) -> list[dict]:
    """One row per (subject, B) where both sides kept each contest trial's median
    (:data:`CONTEST_TRIAL_MEDIANS`): each side's trials (µs, in order over the repeats), their min and
    max, and ``ranges_meet``: whether the harness's trials and the plain ones, widened by the contest
    target, overlap. A diagnostic beside the contest rows, no target of its own: where a contest figure
    misses and the trials' ranges meet, one argument set's placement made the gap (each trial times
    one set, as flashinfer-bench main's evaluator does); where they do not, every trial of one side
    read apart, and the placement draw does not explain it."""
    rows, target = [], TARGETS[Tier.CONTEST]
    for key in sorted(set(harness) & set(plain)):
        ours, theirs = harness[key].get(CONTEST_TRIAL_MEDIANS, []), plain[key].get(CONTEST_TRIAL_MEDIANS, [])
        if not ours or not theirs:
            continue
        rows.append({"subject": key[0], "batch_size": key[1], "harness_trials_us": list(ours),
                     "plain_trials_us": list(theirs), "harness_min_us": min(ours), "harness_max_us": max(ours),
                     "plain_min_us": min(theirs), "plain_max_us": max(theirs),
                     "ranges_meet": ranges_meet(ours, theirs, target)})
    return rows


def slow_line(readings: list[float]) -> float | None:
    """The slowest speed reading (µs of the stand-in) that still counts as the host's full speed among
    ``readings``: :data:`FULL_SPEED_FACTOR` x the fastest of them; None where there are none. The one
    rule of a slow reading, for the cross-check (:func:`full_speed_limit`), the pinned stand-in's log
    (:func:`machine_speed`) and tools/sync_ab.py alike."""
    return min(readings) * FULL_SPEED_FACTOR if readings else None


def full_speed_limit(harness: dict, plain: dict) -> float | None:
    """:func:`slow_line` over every speed reading of the cross-check, both sides and every point;
    None where no reading was recorded."""
    return slow_line([value for side in (harness, plain) for figures in side.values()
                      for key in (PROBE, TRIAL_PROBES) for value in figures.get(key, [])])


def slow_trials(harness: dict, plain: dict) -> dict[str, dict[str, int]] | None:
    """Per side, ``{"slow": n, "trials": n}``: how many of its sync trials' speed readings
    (:data:`TRIAL_PROBES`) were above :func:`full_speed_limit`, over the points both sides measured
    (a bf16-state variant the plain side does not time is left out). None where a side recorded no
    trial's reading. Why: the worker's trials read slow more often than the plain process's in every
    cross-check so far (results/proof/20261127-H100-parity-trials-df1fce0: 52-80% against 38-65%),
    which decides how many points the full-speed comparison can judge; a diagnostic, no target."""
    limit, shared = full_speed_limit(harness, plain), set(harness) & set(plain)
    counts = {}
    for name, side in (("harness", harness), ("plain", plain)):
        readings = [value for key in shared for value in side[key].get(TRIAL_PROBES, [])]
        counts[name] = {"slow": sum(value > limit for value in readings), "trials": len(readings)} if readings else None
    return counts if limit is not None and None not in counts.values() else None


def split_half_ratio(repeats: list[float]) -> float | None:
    """A side's figures at one point and tier against themselves: the median of its odd repeats (first,
    third, ...) over the median of its even ones, in the order measured; None with fewer than two."""
    if len(repeats) < 2:
        return None
    even = statistics.median(repeats[1::2])
    return statistics.median(repeats[0::2]) / even if even > 0 else None


def repeatability(harness: dict, plain: dict) -> dict[str, dict[str, dict[str, int]]]:
    """Per tier and side, ``{"within": n, "points": n}``: over the points both sides measured, at how
    many the side's split-half ratio (:func:`split_half_ratio`) is within the tier's target
    (:data:`TARGETS`); a side with fewer than two repeats at a point is not counted there. Why: a
    harness / plain ratio judged by a target both timers miss against themselves says nothing of
    the harness. flashinfer-bench 0.1.2's loop in two fresh plain processes minutes apart agreed with
    itself within ±15% at 11-16 of 20 points in the nine full cross-checks of 2026-11-27, FlashInfer's
    events timer within ±10% at 12-18 (results/proof/20261127-CPU-repeatability); a diagnostic beside
    the rows, no target of its own."""
    shared = set(harness) & set(plain)
    counts: dict[str, dict[str, dict[str, int]]] = {}
    for tier, target in TARGETS.items():
        for name, side in (("harness", harness), ("plain", plain)):
            ratios = [split_half_ratio(side[key].get(tier, [])) for key in shared]
            ratios = [ratio for ratio in ratios if ratio is not None]
            if ratios:
                counts.setdefault(str(tier), {})[name] = {"within": sum(abs(r - 1) <= target for r in ratios),
                                                          "points": len(ratios)}
    return counts


#: The tiers the proposed yardstick judges against the named timer's own repeatability (docs/timing.md, "Each timer
#: against itself": the issue's literal "within target at every B" is missed by flashinfer-bench 0.1.2's loop and
#: FlashInfer's events loop against themselves); cupti and contest keep every point.
SELF_RELATIVE_TIERS = (Tier.EVENTS, Tier.SYNC)

#: The paired test's level (:func:`paired_p`): a tier reads worse than its named timer's own repeatability where the
#: one-sided p is below it. The usual 5%; the points of one run share a host, so the test errs toward "worse".
PAIRED_LEVEL = 0.05

#: The four kinds of point of :func:`paired_counts`.
PAIRED_KEYS = ("harness_only", "plain_only", "both", "neither")


def paired_counts(harness: dict, plain: dict) -> dict[str, dict[str, int]]:
    """Per tier, the points (both sides measured, the plain side at least twice) sorted by two ratios against one
    reference, the median of the plain repeats in even places (second, fourth, ...): the harness's median over it, and
    the median of the plain repeats in odd places over it (:func:`split_half_ratio`, the plain side against itself).
    ``{"harness_only": n, "plain_only": n, "both": n, "neither": n}``: at how many points only the harness's ratio is
    within the tier's target (:data:`TARGETS`), only the plain one, both, neither.

    Why one reference for both: where the harness tier is the timer it names, a harness run and the plain timer's odd
    repeats are draws of the same timer, so either ratio is as likely as the other to be the one within; the points
    where they differ are a fair coin (:func:`paired_p`); exactly so with one harness run and two plain repeats, the
    cross-check's usual shape, and with more plain repeats than harness runs the odd side's median is the steadier
    one, which makes the test err toward "worse". Comparing the two sides' counts instead ("at least as
    often") reads an exact copy of the timer as a miss in 9-27% of simulated single runs (tools/yardstick_power.py,
    results/proof/20261128-CPU-yardstick-power)."""
    shared = set(harness) & set(plain)
    counts: dict[str, dict[str, int]] = {}
    for tier, target in TARGETS.items():
        for key in shared:
            ours, theirs = harness[key].get(tier, []), plain[key].get(tier, [])
            if not ours or len(theirs) < 2:
                continue
            reference = statistics.median(theirs[1::2])
            if reference <= 0:
                continue
            mine = abs(statistics.median(ours) / reference - 1) <= target
            own = abs(split_half_ratio(theirs) - 1) <= target
            kind = "both" if mine and own else "harness_only" if mine else "plain_only" if own else "neither"
            count = counts.setdefault(str(tier), dict.fromkeys(PAIRED_KEYS, 0))
            count[kind] += 1
    return counts


def paired_p(count: dict[str, int]) -> float:
    """The one-sided exact sign test on :func:`paired_counts`'s discordant points: the chance, were each of them a fair
    coin, of ``plain_only`` or more of them falling to the plain side (``scipy.stats.binomtest``, alternative
    "greater"). Small: the harness is within the target measurably less often than its named timer is against
    itself. 1.0 where no point is discordant."""
    discordant = count["harness_only"] + count["plain_only"]
    if not discordant:
        return 1.0
    return binomtest(count["plain_only"], discordant, 0.5, alternative="greater").pvalue


#: Up to this batch size a contest point whose two sides' trials meet (:func:`compare_contest_trials`) counts
#: toward the proposed yardstick though its mean misses ±2%: each contest trial's reading is fixed by where its
#: process allocated the trial's set, 6-8% apart for cuda-v1 at B = 8 on an H100, so two processes' means of three
#: differ by their allocation histories (results/proof/20261128-H100-contest-trials; docs/timing.md). 64 since
#: 2026-11-28: on an H200 one process's B = 64 trials read up to 6.4% apart with where they land, its contest
#: figure over 2.2% over seven pads (results/proof/20261128-H200-contest-pads), and the worker's history moved all
#: four own kernels' contest figures at B = 64 by 0.4-1.5% (results/proof/20261128-H200-tiers-ab). B = 512 is not
#: measured so: every point there keeps ±2%.
PLACEMENT_BOUND_BATCH = 64


def yardstick_points(tier: str, rows: list[dict], trial_rows: list[dict]) -> int:
    """How many of ``tier``'s rows (:func:`compare`) the proposed yardstick counts: those within the tier's target,
    and for contest also those at B <= :data:`PLACEMENT_BOUND_BATCH` whose trials meet (``trial_rows``:
    :func:`compare_contest_trials`; a point without trials on both sides counts only if within)."""
    meets = {(r["subject"], r["batch_size"]) for r in trial_rows if r["ranges_meet"]}
    placement_bound = Tier(tier) == Tier.CONTEST
    return sum(r["within"] or (placement_bound and r["batch_size"] <= PLACEMENT_BOUND_BATCH
                               and (r["subject"], r["batch_size"]) in meets)
               for r in rows if r["tier"] == tier)


def yardstick(tier: str, within: int, points: int, paired: dict[str, int] | None) -> str:
    """The proposed yardstick's verdict on one tier, for the issue's author to adopt or not (docs/timing.md):
    ``met`` or ``missed``. ``within``: the points it counts (:func:`yardstick_points`). For
    :data:`SELF_RELATIVE_TIERS`, met unless the paired test finds the harness within the target less often than the
    plain timer against itself (:func:`paired_p` below :data:`PAIRED_LEVEL`; ``paired``: :func:`paired_counts`), and
    ``–`` without paired points; for the others, met where every point counts. A proposal beside the issue's targets,
    never in their place."""
    if Tier(tier) not in SELF_RELATIVE_TIERS:
        return "met" if points and within == points else "missed"
    return paired_verdict(paired)


def paired_verdict(paired: dict[str, int] | None) -> str:
    """The paired test's verdict on one tier's :func:`paired_counts` (one run's, or summed over runs): ``met`` unless
    :func:`paired_p` is below :data:`PAIRED_LEVEL`, ``missed`` where it is, ``–`` without paired points."""
    if not paired or not sum(paired.values()):
        return "–"
    return "met" if paired_p(paired) >= PAIRED_LEVEL else "missed"


def paired_cell(paired: dict[str, int] | None) -> str:
    """:func:`paired_counts` of one tier in a table cell: "harness only 4, plain only 8 (p = 0.19)", or "–"."""
    if not paired:
        return "–"
    return f"harness only {paired['harness_only']}, plain only {paired['plain_only']} (p = {paired_p(paired):.2f})"


def machine_speed(blocks: list[tuple[float, float]], phases: list[dict]) -> dict[str, dict[str, int]] | None:
    """Per side, ``{"slow": n, "blocks": n}``: the blocks of a pinned stand-in's log
    (:func:`tools.host_speed_log.read_log`: ``(epoch s, µs)``) that started within that side's phases
    (``{"side", "start", "end"}``, epoch s), and how many read above :data:`FULL_SPEED_FACTOR` x the
    log's fastest block. None without blocks or phases. Why: beside :func:`slow_trials`, it says
    whether a side's extra slow trials were the machine's moment (the pinned CPU slow then too) or
    its own (results/proof/20261127-H100-parity-trials-df1fce0); a diagnostic, no target."""
    if not blocks or not phases:
        return None
    limit, counts = slow_line([value for _, value in blocks]), {}
    for side in sorted({phase["side"] for phase in phases}):
        windows = [(phase["start"], phase["end"]) for phase in phases if phase["side"] == side]
        inside = [value for began, value in blocks if any(start <= began < end for start, end in windows)]
        counts[side] = {"slow": sum(value > limit for value in inside), "blocks": len(inside)}
    return counts


def harness_run_rows(report: dict) -> list[dict]:
    """Each harness run's figure over the plain side's median, per point and tier of :data:`TARGETS`, where the
    cross-check made more than one harness run (``report["figures"]``: a list per tier, one entry per run, in the
    order run): ``{"point", "tier", "ratios"}``. Why: with the runs in rounds between plain ones, an offset that
    both runs show is the harness's, not the order's (results/proof/20261128-H200-parity-order); a diagnostic."""
    figures = report.get("figures") or {}
    harness, plain = figures.get("harness") or {}, figures.get("plain") or {}
    rows = []
    for point in sorted(set(harness) & set(plain)):
        for tier in TARGETS:
            runs, base = harness[point].get(str(tier)) or [], plain[point].get(str(tier)) or []
            if len(runs) > 1 and base:
                median = statistics.median(base)
                rows.append({"point": point, "tier": str(tier), "ratios": [value / median for value in runs]})
    return rows


def paired(figures: dict, values: str, readings: str) -> bool:
    """Whether a point's figures hold ``values`` with one ``readings`` entry each."""
    return bool(figures.get(values)) and len(figures[values]) == len(figures.get(readings, []))


def at_full_speed(figures: dict, limit_us: float, unit: str) -> list[float]:
    """The sync figures (µs) of a point's trials (``unit`` "trials": :data:`TRIAL_MEANS` by
    :data:`TRIAL_PROBES`) or repeats ("repeats": the sync tier's by :data:`PROBE`) whose speed
    reading is at most ``limit_us``; none where the two lists do not pair up one to one."""
    values, readings = (TRIAL_MEANS, TRIAL_PROBES) if unit == "trials" else (Tier.SYNC, PROBE)
    if not paired(figures, values, readings):
        return []
    return [value for value, reading in zip(figures[values], figures[readings]) if reading <= limit_us]


def figures_by_point(found: dict) -> dict[str, dict[str, list[float]]]:
    """``{(subject, B): {tier: [µs]}}`` keyed ``"<subject> B=<B>"`` for JSON: every figure measured,
    also those of points the other side did not reach."""
    return {f"{subject} B={batch}": figures for (subject, batch), figures in sorted(found.items())}


def points_from_figures(stored: dict[str, dict[str, list[float]]]) -> dict:
    """:func:`figures_by_point` undone: ``{(subject, B): {tier: [µs]}}``."""
    found = {}
    for point, figures in stored.items():
        subject, _, batch = point.rpartition(" B=")
        found[(subject, int(batch))] = figures
    return found


def judged(report: dict, harness: dict, plain: dict) -> dict:
    """``report`` with its comparisons made from the two sides' figures: ``rows`` (:func:`compare`),
    ``host_rows`` (:func:`compare_host`), ``full_speed_rows`` (:func:`compare_at_full_speed`),
    ``slow_trials`` (:func:`slow_trials`), ``contest_trial_rows`` (:func:`compare_contest_trials`) and
    ``repeatability`` (:func:`repeatability`) and ``paired`` (:func:`paired_counts`)."""
    return {**report, "figures": {"harness": figures_by_point(harness), "plain": figures_by_point(plain)},
            "rows": compare(harness, plain), "host_rows": compare_host(harness, plain),
            "full_speed_rows": compare_at_full_speed(harness, plain), "slow_trials": slow_trials(harness, plain),
            "contest_trial_rows": compare_contest_trials(harness, plain),
            "repeatability": repeatability(harness, plain), "paired": paired_counts(harness, plain)}


def rejudge(stored: Path, out: Path) -> dict:
    """A recorded cross-check (its ``tier_parity.json``, or that file's ``.gz``) judged again by this
    version's comparisons (:func:`judged_again`), its report written into ``out`` (never over ``stored``'s
    folder's files unless ``out`` is it); the figures are the recorded ones, nothing is measured.

    Raises:
        OSError: ``stored`` cannot be read.
        ValueError: it is not JSON, or holds no ``figures`` of both sides.
    """
    report = judged_again(stored)
    write_report(out, report)
    return report


def judged_again(stored: Path) -> dict:
    """The report of a recorded cross-check (``tier_parity.json``, or that file's ``.gz``) with every comparison
    made again by this version from its recorded figures (:func:`judged`); nothing measured, nothing written.

    Raises:
        OSError: ``stored`` cannot be read.
        ValueError: it is not JSON, or holds no ``figures`` of both sides.
    """
    data = read_stored(stored)  # the file as named, or its .gz: recorded cross-checks are kept compressed
    if data is None:
        raise FileNotFoundError(f"{stored}: no such file (nor {stored.name}.gz)")
    try:
        report = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{stored}: not JSON ({exc})") from exc
    figures = report.get("figures") if isinstance(report, dict) else None
    figures = figures if isinstance(figures, dict) else {}
    if not all(isinstance(figures.get(side), dict) and figures[side] for side in ("harness", "plain")):
        raise ValueError(f"{stored}: no figures of both sides (field 'figures')")
    from harness.records.environment import git_commit

    made = {**report, "rejudged_from": str(stored), "rejudged_by_commit": git_commit(),
            "rejudged_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    try:
        return judged(made, points_from_figures(figures["harness"]), points_from_figures(figures["plain"]))
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # figures not as tier_parity writes them
        raise ValueError(f"{stored}: field 'figures' is not as tools.tier_parity writes it "
                         f"({type(exc).__name__}: {exc})") from exc


def tier_counts(report: dict) -> dict[str, dict]:
    """Per tier of a judged report's ``repeatability``: ``{"within": n, "yardstick": n, "points": n, "plain_self":
    {"within", "points"} or None, "harness_self": ... or None, "paired": {...} or None}``: its rows within the issue's
    target, the points the proposed yardstick counts (:func:`yardstick_points`), its rows, each side against itself
    (:func:`repeatability`) and the paired test's points (:func:`paired_counts`). What the report's yardstick table
    and ``tools/parity_pool.py``'s sums are made of."""
    rows, trial_rows, paired = report["rows"], report.get("contest_trial_rows") or [], report.get("paired") or {}
    counts = {}
    for tier, sides in (report.get("repeatability") or {}).items():
        mine = [r for r in rows if r["tier"] == tier]
        counts[tier] = {"within": sum(r["within"] for r in mine), "yardstick": yardstick_points(tier, rows, trial_rows),
                        "points": len(mine), "plain_self": sides.get("plain"), "harness_self": sides.get("harness"),
                        "paired": paired.get(tier)}
    return counts


def share(count: dict[str, int] | None) -> str:
    """A ``{"within", "points"}`` count in words ("13 of 20"), or "–" for none."""
    return "–" if count is None else f"{count['within']} of {count['points']}"


def _cell(value: float | None, digits: int) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def write_report(out: Path, report: dict) -> None:
    """``tier_parity.json`` and ``tier_parity.md``."""
    lines = [f"# Tier parity — {report['hardware']}, {report['date']}, commit {report['git_commit']}", "",
             f"Command: `{report['command']}`", ""]
    if report.get("stopped"):
        lines += [f"**Incomplete:** {report['stopped']}; the table compares the points both sides reached, and "
                  "tier_parity.json's `figures` holds every figure measured.", ""]
    lines += ["Plain-process timers:", ""]
    lines += [f"* `{tier}`: {timer}" for tier, timer in report.get("plain_timers", {}).items()]
    lines += ["", f"Each plain timer (each trial) after {report.get('plain_warm_s', 0)} s of back-to-back flush + call "
                  "(the clock warm-up every harness tier gets)."]
    sets = report.get("plain_sets", 1)
    if sets != 1:
        lines += ["", f"The plain cupti and events timers took {sets} argument sets (each of its own allocations) "
                      "in turn, as the timing core takes its buffer sets (up to 8 within 2 GiB); the contest and sync "
                      "timers one a trial, as flashinfer-bench's evaluators."]
    if report.get("plain_flush_mb"):
        lines += ["", f"A probe: FlashInfer's timers in the plain process flushed {report['plain_flush_mb']} MB "
                      "(as the harness does), not their own 2 x L2."]
    lines += ["", f"Harness µs: the median of {report.get('harness_repeats', 1)} run(s); plain µs: the median of "
                  f"{report['plain_repeats']} repeat(s), each in a fresh process, in rounds with the harness's runs; "
                  "\"in plain's range\": the harness's min-max meets the plain min-max widened by the target.",
              "", "| subject | B | tier | harness µs | harness min–max | plain µs | plain min–max | harness / plain | "
                  "target | within | in plain's range |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['subject']} | {r['batch_size']} | {r['tier']} | {r['harness_us']:.3f} | "
              f"{r['harness_min_us']:.3f}–{r['harness_max_us']:.3f} | {r['plain_us']:.3f} | "
              f"{r['plain_min_us']:.3f}–{r['plain_max_us']:.3f} | "
              f"{r['ratio']:.3f} | ±{r['target']:.0%} | {'yes' if r['within'] else '**no**'} | "
              f"{'yes' if r['within_spread'] else '**no**'} |" for r in report["rows"]]
    if report.get("repeatability"):
        lines += ["", "Each side against itself: its repeats split in two halves (odd against even, in the order "
                      "measured), the ratio of their medians judged by the same target, over the points both sides "
                      "measured. A harness / plain count is read against these: two runs of one timer miss its "
                      "target as often as that. The paired test: at each point the harness's median and the plain "
                      "timer's odd repeats, each over the plain timer's even repeats; where only one of the two ratios "
                      "is within the target, a point for that side; p: the one-sided sign test on those points "
                      "(small: the harness is within less often than the timer against itself). The last column is "
                      "the yardstick proposed to the issue's author (docs/timing.md): events and sync not worse by "
                      f"the paired test (p >= {PAIRED_LEVEL}), cupti and contest at every point, a contest point at "
                      f"B <= {PLACEMENT_BOUND_BATCH} also where the two sides' trials meet (the trial table below); "
                      "the issue's targets are the rows above.", "",
                  "| tier | target | harness / plain within | plain against itself | harness against itself | "
                  "paired test | proposed yardstick |",
                  "|---|---|---|---|---|---|---|"]
        for tier, count in tier_counts(report).items():
            lines.append(f"| {tier} | ±{TARGETS[Tier(tier)]:.0%} | {count['within']} of {count['points']} | "
                         f"{share(count['plain_self'])} | {share(count['harness_self'])} | "
                         f"{paired_cell(count['paired'])} | "
                         f"{yardstick(tier, count['yardstick'], count['points'], count['paired'])} |")
    if report.get("host_rows"):
        lines += ["", "The host beside the sync tier, both sides measured alike (µs; median over the trials, then "
                      "over the repeats). Host time of one call: the untimed call after each trial, timed with "
                      "`time.perf_counter` (the worker's `host_call_us`). Host speed: a fixed pure-Python stand-in "
                      "just before and after each trial's loop (`host_probe_us`, harness/judge/timing/host_speed.py; "
                      "larger is slower). Diagnostics, no target: where the host ratio follows the sync ratio, the "
                      "sync gap is the host's path to the launch; where the speed ratio does too, the two sides' "
                      "hosts ran at different speeds.",
                  "", "| subject | B | harness host µs | plain host µs | host ratio | harness speed µs | plain speed µs | "
                      "speed ratio | sync ratio |", "|---|---|---|---|---|---|---|---|---|"]
        sync = {(r["subject"], r["batch_size"]): r["ratio"] for r in report["rows"] if r["tier"] == Tier.SYNC}
        lines += [f"| {r['subject']} | {r['batch_size']} | {_cell(r['harness_host_us'], 1)} | "
                  f"{_cell(r['plain_host_us'], 1)} | {_cell(r['host_ratio'], 3)} | {_cell(r['harness_probe_us'], 2)} | "
                  f"{_cell(r['plain_probe_us'], 2)} | {_cell(r['probe_ratio'], 3)} | "
                  f"{_cell(sync.get((r['subject'], r['batch_size'])), 3)} |" for r in report["host_rows"]]
    if report.get("full_speed_rows"):
        rows = report["full_speed_rows"]
        lines += ["", f"The sync tier at the host's full speed: each side's trials (where both sides recorded each "
                      "trial's mean and speed reading; else its repeats: the unit column) whose speed reading was at "
                      f"most {FULL_SPEED_FACTOR} x the cross-check's fastest ({rows[0]['limit_us']:.2f} µs), the median "
                      "of their sync figures; n: how many. Beside the sync rows above, not instead of them: a host-bound "
                      "figure read in a vCPU's slow episode is the host's (docs/timing.md). \"–\": a side had none.",
                  "", "| subject | B | unit | harness µs | harness n | plain µs | plain n | harness / plain | within ±15% |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [f"| {r['subject']} | {r['batch_size']} | {r['unit']} | {_cell(r['harness_us'], 3)} | "
                  f"{r['harness_count']} | {_cell(r['plain_us'], 3)} | {r['plain_count']} | {_cell(r['ratio'], 3)} | "
                  f"{'–' if r['within'] is None else ('yes' if r['within'] else '**no**')} |" for r in rows]
    if report.get("contest_trial_rows"):
        ratios = {(r["subject"], r["batch_size"]): r["ratio"] for r in report["rows"] if r["tier"] == Tier.CONTEST}
        lines += ["", "The contest tier trial by trial: each trial's median (µs, in order over the repeats), each trial on "
                      "an argument set of its own, as flashinfer-bench main's evaluator. \"Ranges meet\": the harness's "
                      f"trials and the plain ones widened by ±{TARGETS[Tier.CONTEST]:.0%} overlap, so a contest miss there "
                      "is within one placement draw of the buffers. A diagnostic, no target.",
                  "", "| subject | B | harness trials | plain trials | contest ratio | ranges meet |", "|---|---|---|---|---|---|"]
        lines += [f"| {r['subject']} | {r['batch_size']} | {' '.join(f'{v:.3f}' for v in r['harness_trials_us'])} | "
                  f"{' '.join(f'{v:.3f}' for v in r['plain_trials_us'])} | "
                  f"{_cell(ratios.get((r['subject'], r['batch_size'])), 3)} | "
                  f"{'yes' if r['ranges_meet'] else '**no**'} |" for r in report["contest_trial_rows"]]
    if report.get("slow_trials"):
        lines += ["", f"Sync trials read slow (speed reading above {FULL_SPEED_FACTOR} x the fastest), over the points "
                      f"both sides measured: {slow_share(report['slow_trials'])}. A diagnostic, no target: it decides "
                      "how many points the comparison above can judge."]
    if report.get("machine_speed"):
        lines += ["", f"The machine beside the run: a stand-in pinned to CPU {report.get('speed_log_cpu')} "
                      f"(tools/host_speed_log.py, speed_log.txt), its 20-ms blocks above {FULL_SPEED_FACTOR} x its "
                      f"fastest while each side ran: {slow_share(report['machine_speed'], 'blocks', ' slow')}. "
                      "Where a side's trials read slow more often than the pinned CPU did at the same moments, the "
                      "slowness is that side's own."]
    by_run = harness_run_rows(report)
    if by_run:
        lines += ["", "Each harness run's figure over the plain median, in the order the runs were made (each run in a "
                      "round before a plain one): an offset every run shows is the harness's, not the order's. A "
                      "diagnostic, no target.", "", "| point | tier | harness runs / plain |", "|---|---|---|"]
        lines += [f"| {r['point']} | {r['tier']} | {' '.join(f'{v:.4f}' for v in r['ratios'])} |" for r in by_run]
    if report.get("gpu_clocks"):
        lines += ["", "The GPU's clocks beside the run (nvidia-smi once a second, read, never set; "
                      "tools/gpu_clock_log.py, gpu_clocks.csv), by phase: the SM clock's median over the samples "
                      "not marked idle, its range over all, the memory clocks seen, the temperature, the power's "
                      "median and the clock-event reason words (0x1: idle).", "",
                  "| phase | side | samples (busy) | SM MHz, busy median (min-max) | memory MHz | °C | W | reasons |",
                  "|---|---|---|---|---|---|---|---|"]
        for number, row in enumerate(report["gpu_clocks"], 1):
            if not row["samples"]:
                lines.append(f"| {number} | {row['side']} | 0 | – | – | – | – | – |")
                continue
            lines.append(f"| {number} | {row['side']} | {row['samples']} ({row['busy']}) | "
                         f"{row['sm_mhz_busy_median']:.0f} ({row['sm_mhz_min']}-{row['sm_mhz_max']}) | "
                         f"{'/'.join(str(m) for m in row['mem_mhz'])} | {row['temp_c'][0]}-{row['temp_c'][1]} | "
                         f"{row['power_w_median']:.0f} | "
                         f"{', '.join(f'{k}: {v}' for k, v in row['reasons'].items())} |")
    with writing_into([out]):  # never while a run's vault watches results/ (harness/run_lock.py)
        out.mkdir(parents=True, exist_ok=True)
        (out / "tier_parity.json").write_text(json.dumps(report, indent=2) + "\n")
        (out / "tier_parity.md").write_text("\n".join(lines) + "\n")


def full_speed_count(report: dict) -> dict[str, int]:
    """The sync tier at the host's full speed in a judged report (``full_speed_rows``): ``{"within": n, "judged": n}``
    over the points where both sides had full-speed trials or repeats (:func:`compare_at_full_speed`)."""
    judged = [row["within"] for row in report.get("full_speed_rows") or [] if row["within"] is not None]
    return {"within": sum(judged), "judged": len(judged)}


def summary(report: dict) -> str:
    """The report's counts in one line: within target, within the widened range, and the sync tier at
    full speed (where any point could be judged so)."""
    rows, fast = report["rows"], full_speed_count(report)
    line = (f"{sum(r['within'] for r in rows)} of {len(rows)} within their targets; "
            f"{sum(r['within_spread'] for r in rows)} within the plain timer's range widened by the target")
    line += f"; sync at full speed: {fast['within']} of {fast['judged']} judged" if fast["judged"] else ""
    plain_sync = (report.get("repeatability") or {}).get(str(Tier.SYNC), {}).get("plain")
    line += f"; the plain sync timer against itself: {share(plain_sync)}" if plain_sync else ""
    return line + (f"; slow trials: {slow_share(report['slow_trials'])}" if report.get("slow_trials") else "")


def slow_share(counts: dict[str, dict[str, int]], total: str = "trials", suffix: str = "") -> str:
    """Per-side slow counts in words, of :func:`slow_trials` ("harness 103 of 168, plain 46 of 120")
    or, with ``total="blocks"``, of :func:`machine_speed`."""
    return ", ".join(f"{side} {count['slow']:,} of {count[total]:,}{suffix}" for side, count in counts.items())
