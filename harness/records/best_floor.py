"""The copy floor of a run: the best of the copies it measured.

The judge times several copies of each workload's state bytes (torch's ``copy_`` and, on a
GPU, Triton streaming copies; :mod:`harness.judge.floor`), each stored in ``floors.jsonl``
as a :class:`~harness.records.trace.FloorMeasurement` naming its ``method``; the copies it
measured together share ``best_of``. The floor, the physical limit, is the fastest of them
**per tier**, because a figure is only ever divided by a floor of its own tier. Everything
that uses the floor reads it from here: the annotation (``× copy floor``), the summary
table, the leaderboard, the plots and the tools. (The judge's rejection limit takes the
fastest single call of every copy instead: :func:`harness.judge.floor.physical_limit_us`.)

Where a run holds several such groups for one workload and state dtype (lanes of
``--gpus``, Modal containers merged into one run), each group's best counts once and their
median is the floor, as the floors of the lanes counted before there were methods. A floor
stored before ``best_of`` existed is a group of its own, so an older run gives the numbers
it gave.
"""

from __future__ import annotations

import statistics
from collections import defaultdict

from pydantic import Field

from harness.facts import TIERS
from harness.records.trace import FloorMeasurement


class BestFloor(FloorMeasurement):
    """The floor of one group of copies (:func:`best_floors`): per tier the figure of the fastest
    copy. Built when reading, never stored: ``floors.jsonl`` holds the copies themselves."""

    tier_methods: dict[str, str] = Field(default_factory=dict)
    """Tier name -> the method whose figure ``tiers`` holds for it."""
    methods: list[str] = Field(default_factory=list)
    """Every method measured in the group, in the order measured."""


def best_floors(floors: list[FloorMeasurement]) -> list[BestFloor]:
    """One :class:`BestFloor` per group of copies (same workload, state dtype and ``best_of``;
    a floor without ``best_of`` alone), in the order of their first copy: per tier the figure
    with the smallest ``value_us`` (the first copy's on a tie), every method named. A group of
    one copy comes back with that copy's figures unchanged."""
    groups: dict[tuple, list[FloorMeasurement]] = defaultdict(list)
    for index, floor in enumerate(floors):
        alone = floor.best_of is None
        groups[(floor.workload, floor.state_dtype, index if alone else floor.best_of, alone)].append(floor)
    return [_combine(members) for members in groups.values()]


def _combine(members: list[FloorMeasurement]) -> BestFloor:
    """The :class:`BestFloor` of one group of :func:`best_floors`."""
    tiers, tier_methods = {}, {}
    for floor in members:
        for tier, figure in floor.tiers.items():
            if figure.timed and (tier not in tier_methods or figure.value_us < tiers[tier].value_us):
                tiers[tier], tier_methods[tier] = figure, floor.method
            elif tier not in tiers:  # a tier no copy timed (yet) keeps the first reason
                tiers[tier] = figure
    first, methods = members[0], list(dict.fromkeys(f.method for f in members))
    order = sorted(tiers, key=lambda t: TIERS.index(t) if t in TIERS else len(TIERS))
    return BestFloor(workload=first.workload, batch_size=first.batch_size, state_dtype=first.state_dtype,
                     nbytes=first.nbytes, method=methods[0] if len(methods) == 1 else f"best of {len(methods)} copies",
                     best_of=first.best_of, tiers={t: tiers[t].model_copy() for t in order},
                     environment=first.environment, timestamp=first.timestamp, tier_methods=tier_methods,
                     methods=methods)


def floor_times(floors: list[FloorMeasurement]) -> dict[tuple[str, str, str], float]:
    """(workload uuid, state dtype, tier) -> the floor, µs: each group's fastest copy in that tier
    (:func:`best_floors`), the median over groups where there are several (module doc).
    Independent of the order of ``floors``."""
    samples = defaultdict(list)
    for best in best_floors(floors):
        for tier, figure in best.tiers.items():
            if figure.timed:
                samples[(best.workload, best.state_dtype, tier)].append(figure.value_us)
    return {key: statistics.median(values) for key, values in samples.items()}
