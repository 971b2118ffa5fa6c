"""Are the picks' decisions right? The paired ratio to the runner-up, over whole studies (issue 37)

For each simulator profile (with the search space the efficiency harness pairs it with) and
each seed, runs the product's study in-process (`_simulated.run_study`: its study loop and
trial chain, the simulated launcher and bench; each request carries the simulator's
per-request effect, the same in every launch, plus per-second and per-launch speed noise),
then reads each pick (latency, throughput) as the product reports it: `recommend(snapshot)`
and its `versus` (what `pareto --json` gives as `versus_runner_up`: the runner-up it names,
the paired ratio, its 95% interval, separated or tied). Nothing of that is recomputed here.
The noiseless ratio is the pick's `autospec.sim.predict` figure over the runner-up's on the
pick's objective (`optimum_gap.noiseless_truth`). Per profile and overall:

    covered    the reported interval holds the noiseless ratio (bar: 90% of decisions)
    separated  among decisions whose noiseless ratio is >= 1.05: reported separated (bar 90%)
    tied       among those within 1% (0.99 < noiseless < 1.01): reported tied (bar 90%)
    attainable among the separated ones, the chance an oracle would report them separated: one
               that knows the between-launch spread tau (`--launch-noise`) and has no
               per-request noise at all, with the launches behind each side; its mean is the
               most the separated bar can reach with those launches (a yardstick: the pick
               is chosen as the best measured, which this ignores)
    between    noiseless 1.01-1.05 (no bar); worse: noiseless <= 0.99 (the pick is truly worse)

Each study also prints, per objective, how close its front's best and its pick come to the
exhaustive optimum of that objective over the grid, both valued noiselessly (what
`optimum_gap.py` reports for its own studies; a tally gives the median and the worst per profile):

    gap        front best / optimum and pick / optimum, C=1 (latency pick) and C=32 (throughput)

    python benchmarks/pick_decisions.py --seeds 1 2 3 4 --jobs 1
    python benchmarks/pick_decisions.py --profiles llama31-8b-eagle3-1x-h100 --seeds 1 --trials 6
    python benchmarks/pick_decisions.py --tally run1.log run2.log   # one table over earlier runs' lines
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _simulated import run_study_as_asked
from efficiency import CASES, load_case
from optimum_gap import noiseless_truth, optimum_of

from autospec.report import recommend, snapshot

BAR = 0.90
SEPARATED_AT = 1.05
TIED_WITHIN = 0.01


@dataclass(frozen=True)
class Decision:
    """One pick against the runner-up the report names: the reported ratio and interval,
    separated or not, whether it was paired, and the noiseless ratio."""

    profile: str
    seed: int
    pick: str
    number: int
    runner_up: int
    ratio: float
    lo: float
    hi: float
    separated: bool
    paired: bool
    truth: float
    references: str = ""  # which of the two are reference points (for reading failures)
    launches: tuple[int, int] | None = None  # behind the pick and the runner-up (older logs: unknown)

    @property
    def covered(self) -> bool:
        return self.lo <= self.truth <= self.hi

    @property
    def bucket(self) -> str:
        if self.truth >= SEPARATED_AT:
            return "separated"
        if abs(self.truth - 1.0) < TIED_WITHIN:
            return "tied"
        return "worse" if self.truth <= 1.0 - TIED_WITHIN else "between"


def decisions_of(study: Any, name: str, seed: int, truth: Any) -> list[Decision]:
    """The latency and throughput picks of one finished study, as the report gives them."""
    data = snapshot(study)
    out = []
    for pick in recommend(data).values():
        v = pick.versus
        if pick.objective is None or v is None:
            continue
        o = data.objectives[pick.objective]
        other = next(t for t in data.trials if t.number == v["runner_up"])
        a, b = truth(pick.trial.flags, o), truth(other.flags, o)
        noiseless = a / b if b > 0 else float("inf")
        if not o.maximize:
            noiseless = 1.0 / noiseless if noiseless else float("inf")
        refs = ", ".join(f"{who} is {t.reference}" for who, t in (("pick", pick.trial), ("runner-up", other)) if t.reference)
        out.append(
            Decision(
                name,
                seed,
                pick.name,
                pick.trial.number,
                other.number,
                v["ratio"],
                v["lo"],
                v["hi"],
                v["separated"],
                v["paired"],
                noiseless,
                refs,
                (int(v["launches"][0]), int(v["launches"][1])),
            )
        )
    return out


GAP_LINE = re.compile(r"^(?P<profile>\S+) seed (?P<seed>\d+) gap: (?P<rows>.*)$")
GAP_ROW = re.compile(r"(?P<objective>\S+) front (?P<front>[\d.]+) pick (?P<pick>[\d.]+|-)")


@dataclass(frozen=True)
class Gap:
    """One study's front best and pick over the optimum, per objective (noiseless)."""

    profile: str
    seed: int
    objective: str
    front: float
    pick: float | None


def gaps_of(study: Any, name: str, seed: int, truth: Any, optimum: Sequence[float]) -> list[Gap]:
    """Per objective, the best front configuration's and the pick's noiseless value over the
    optimum (the latency pick for the lowest-concurrency objective, the throughput pick for the
    highest, as `optimum_gap` pairs them)."""
    data = snapshot(study)
    picks = recommend(data)
    out = []
    for i, o in enumerate(data.objectives):

        def share(value: float, best: float = optimum[i], maximize: bool = o.maximize) -> float:
            return (value / best if maximize else best / value) if best and value else 0.0

        values = [truth(t.flags, o) for t in data.front]
        front = (max(values) if o.maximize else min(values)) if values else 0.0
        pick = next((p.trial for p in picks.values() if p.objective == i and p.name in ("latency", "throughput")), None)
        out.append(Gap(name, seed, o.name, share(front), None if pick is None else share(truth(pick.flags, o))))
    return out


def parse_gaps(line: str) -> list[Gap]:
    """The gaps of one of the per-study gap lines `main` prints (empty for other lines)."""
    m = GAP_LINE.match(line)
    if m is None:
        return []
    return [
        Gap(m["profile"], int(m["seed"]), r["objective"], float(r["front"]), None if r["pick"] == "-" else float(r["pick"]))
        for r in GAP_ROW.finditer(m["rows"])
    ]


def gap_rows(gaps: Sequence[Gap]) -> list[str]:
    """Per profile and objective: the median and worst front best / optimum and pick / optimum."""
    rows = [
        "| profile | objective | studies | front best / optimum: median | worst | pick / optimum: median | worst |",
        "|---|---|---|---|---|---|---|",
    ]
    groups: dict[tuple[str, str], list[Gap]] = {}
    for g in gaps:
        groups.setdefault((g.profile, g.objective), []).append(g)
    for (name, objective), gs in groups.items():
        fronts, picks = [g.front for g in gs], [g.pick for g in gs if g.pick is not None]
        pick = f"{statistics.median(picks):.3f} | {min(picks):.3f}" if picks else "- | -"
        rows.append(f"| {name} | {objective} | {len(gs)} | {statistics.median(fronts):.3f} | {min(fronts):.3f} | {pick} |")
    return rows


LINE = re.compile(
    r"^(?P<profile>\S+) seed (?P<seed>\d+) (?P<pick>\w+): trial (?P<number>\d+) / runner-up (?P<runner_up>\d+): "
    r"reported x(?P<ratio>[\d.]+) \(95% (?P<lo>[\d.]+)-(?P<hi>[\d.]+), (?P<paired>paired|unpaired)\) "
    r"(?P<verdict>separated|tied); noiseless x(?P<truth>[\d.]+|inf)"
    r"(?: \((?:NOT )?covered\); launches (?P<na>\d+) and (?P<nb>\d+))?"
)


def parse_line(line: str) -> Decision | None:
    """A decision from one of the per-study lines `main` prints (None for other lines)."""
    m = LINE.match(line)
    if m is None:
        return None
    g = m.groupdict()
    return Decision(
        g["profile"],
        int(g["seed"]),
        g["pick"],
        int(g["number"]),
        int(g["runner_up"]),
        float(g["ratio"]),
        float(g["lo"]),
        float(g["hi"]),
        g["verdict"] == "separated",
        g["paired"] == "paired",
        float(g["truth"]),
        launches=(int(g["na"]), int(g["nb"])) if g["na"] else None,
    )


def _share(hits: int, n: int) -> str:
    return f"{hits}/{n} ({hits / n:.0%})" if n else "-"


def _ratio_to_bar(hits: int, n: int) -> str:
    return f"{hits / n / BAR:.2f}" if n else "-"


def attainable(d: Decision, tau: float) -> float | None:
    """The chance an oracle (module docstring) reports `d` separated: its noiseless log ratio
    over tau x sqrt(1/nA + 1/nB), less 1.96, through the normal distribution; None where the
    launches are not known."""
    if d.launches is None or tau <= 0:
        return None
    sd = tau * math.sqrt(1 / d.launches[0] + 1 / d.launches[1])
    return NormalDist().cdf(abs(math.log(d.truth)) / sd - 1.959963984540054)


def _mean_attainable(ds: Sequence[Decision], tau: float) -> str:
    found = [p for p in (attainable(d, tau) for d in ds) if p is not None]
    return f"{statistics.fmean(found):.0%} of {len(found)}" if found else "-"


def summary_rows(decisions: Sequence[Decision], tau: float = 0.02) -> list[str]:
    """The table's rows: per profile, then overall (markdown); `tau`: the between-launch spread
    the attainable column assumes."""
    rows = [
        "| profile | studies | decisions | paired | covered | vs bar | separated (>= 1.05) | vs bar | attainable "
        "| tied (within 1%) | vs bar | between 1.01-1.05 | worse (<= 0.99) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    groups = {d.profile: [] for d in decisions}  # type: dict[str, list[Decision]]
    for d in decisions:
        groups[d.profile].append(d)
    for name, ds in [*groups.items(), ("overall", list(decisions))]:
        n, cov = len(ds), sum(d.covered for d in ds)
        sep = [d for d in ds if d.bucket == "separated"]
        tie = [d for d in ds if d.bucket == "tied"]
        k_sep, k_tie = sum(d.separated for d in sep), sum(not d.separated for d in tie)
        rows.append(
            f"| {name} | {len({(d.profile, d.seed) for d in ds})} | {n} | {sum(d.paired for d in ds)} | {_share(cov, n)} "
            f"| {_ratio_to_bar(cov, n)} | {_share(k_sep, len(sep))} | {_ratio_to_bar(k_sep, len(sep))} "
            f"| {_mean_attainable(sep, tau)} | {_share(k_tie, len(tie))} | {_ratio_to_bar(k_tie, len(tie))} "
            f"| {sum(d.bucket == 'between' for d in ds)} | {sum(d.bucket == 'worse' for d in ds)} |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--profiles", nargs="+", default=list(CASES), choices=list(CASES), metavar="PROFILE")
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 13)))
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--sampler", default="model")
    ap.add_argument("--jobs", type=int, default=1, help="studies run at once")
    ap.add_argument("--noise", type=float, default=0.05, help="the server's speed spread per second of a level")
    ap.add_argument("--launch-noise", type=float, default=0.02, help="the spread of a launch's speed (between launches)")
    ap.add_argument("--confirm", type=int, default=None, help="the study's --confirm K (default: the tool's default)")
    ap.add_argument("--tally", nargs="+", type=Path, metavar="LOG", help="only tally the per-study lines of these logs")
    args = ap.parse_args(argv)
    if args.tally:
        lines = [line for log in args.tally for line in log.read_text().splitlines()]
        found = [d for d in map(parse_line, lines) if d is not None]
        print("\n".join(summary_rows(sorted(set(found), key=lambda d: (d.profile, d.seed, d.pick)), args.launch_noise)))
        tallied = sorted({g for line in lines for g in parse_gaps(line)}, key=lambda g: (g.profile, g.objective, g.seed))
        if tallied:
            print("\n" + "\n".join(gap_rows(tallied)))
        return 0

    decisions: list[Decision] = []
    gaps: list[Gap] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.profiles:
            space, profile = load_case(CASES[name])
            truth, _ = noiseless_truth(space, profile)
            _, optimum = optimum_of(space, truth)

            def one(
                seed: int,
                name: str = name,
                space: Any = space,
                profile: Any = profile,
                truth: Any = truth,
                optimum: list[float] = optimum,
            ) -> tuple[list[Decision], list[Gap]]:
                t0 = time.monotonic()
                study = run_study_as_asked(args, space, profile, seed, Path(tmp) / f"{name}-{seed}", f"decisions-{name}-{seed}")
                found = decisions_of(study, name, seed, truth)
                found_gaps = gaps_of(study, name, seed, truth, optimum)
                print(
                    f"{name} seed {seed} gap: "
                    + "; ".join(
                        f"{g.objective} front {g.front:.3f} pick {'-' if g.pick is None else f'{g.pick:.3f}'}" for g in found_gaps
                    ),
                    flush=True,
                )
                for d in found:
                    na, nb = d.launches or (0, 0)
                    print(
                        f"{name} seed {seed} {d.pick}: trial {d.number} / runner-up {d.runner_up}: reported x{d.ratio:.3f} "
                        f"(95% {d.lo:.3f}-{d.hi:.3f}, {'paired' if d.paired else 'unpaired'}) "
                        f"{'separated' if d.separated else 'tied'}; noiseless x{d.truth:.3f} "
                        f"({'covered' if d.covered else 'NOT covered'}); launches {na} and {nb}; "
                        f"{time.monotonic() - t0:.0f} s" + (f"; {d.references}" if d.references else ""),
                        flush=True,
                    )
                return found, found_gaps

            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                for found, found_gaps in pool.map(one, args.seeds):
                    decisions.extend(found)
                    gaps.extend(found_gaps)
    print()
    print("\n".join(summary_rows(decisions, args.launch_noise)))
    print("\n" + "\n".join(gap_rows(gaps)))
    return 0


if __name__ == "__main__":
    t0 = time.monotonic()
    code = main()
    print(f"\n({time.monotonic() - t0:.0f} s)")
    sys.exit(code)
