"""Typed warnings about how far a measurement can be trusted (pure).

Each warning has a one-letter code for the table, a kind for JSON and a sentence for
the legend. Thresholds follow hyperfine's and pytest-benchmark's habit of flagging
few samples and high spread rather than hiding them.

    S  few-samples    fewer than MIN_SAMPLES successful requests behind an objective
    V  high-variance  an objective's 95% interval is wider than +-MAX_RELATIVE_HALF_WIDTH
    W  short-steady   an aggregate objective's steady window (C requests in flight) was
                      under half of its level's run: the figure leans on ramp-up/drain
    F  few-waves      an aggregate objective's steady window held under 3 waves: its
                      interval comes from sub-wave slices (erring wide) and cannot show
                      how waves differ
    E  errors         some requests failed at a measured level (below the failure threshold)
    R  kv-retraction  the server ran out of KV cache and retracted requests while measured
    I  imported       numbers come from an import, not from an autospec measurement
"""

from __future__ import annotations

from dataclasses import dataclass

from autospec.metrics import SHORT_WINDOW
from autospec.metrics.paired import PRIOR_SD, LogSpread
from autospec.records import WITHDRAWN
from autospec.records.launches import race_check
from autospec.report.data import StudyData, TrialView

__all__ = ["TrialWarning", "WARNING_KINDS", "trial_warnings", "study_warnings", "MIN_SAMPLES", "MAX_RELATIVE_HALF_WIDTH"]

#: objectives whose figure is the steady-state aggregate (autospec.metrics.steady)
_STEADY_METRICS = ("agg_output_tok_s",)

MIN_SAMPLES = 10
MAX_RELATIVE_HALF_WIDTH = 0.05

# kind -> (code, legend sentence)
WARNING_KINDS: dict[str, tuple[str, str]] = {
    "few-samples": (
        "S",
        f"fewer than {MIN_SAMPLES} successful requests behind an objective; its interval is rough (raise [bench] min_requests)",
    ),
    "high-variance": (
        "V",
        f"an objective's 95% interval is wider than +-{MAX_RELATIVE_HALF_WIDTH:.0%} of its value; "
        "differences smaller than that are noise",
    ),
    "short-steady": (
        "W",
        "an aggregate objective's steady window (C requests in flight, ramp-up and drain left out) "
        "was under half of its level's run; the figure is rough (raise [bench] min_requests or "
        "max_share_of_launch)",
    ),
    "few-waves": (
        "F",
        "an aggregate objective's steady window held under 3 waves of C requests; its interval comes from "
        "slices of one wave (it errs wide, and cannot show how waves differ; raise [bench] min_requests, or "
        "relaunch with --confirm K)",
    ),
    "errors": ("E", "some requests failed while measuring (below the failure threshold); the figures exclude them"),
    "kv-retraction": ("R", "the KV cache filled up and SGLang retracted requests during the benchmark"),
    "imported": ("I", "imported from earlier measurements (autospec import); not measured by this study"),
}


@dataclass(frozen=True)
class TrialWarning:
    kind: str
    detail: str

    @property
    def code(self) -> str:
        return WARNING_KINDS[self.kind][0]


def trial_warnings(data: StudyData, trial: TrialView) -> list[TrialWarning]:
    """Warnings for one measured trial, in WARNING_KINDS order."""
    out: list[TrialWarning] = []
    if trial.imported:
        source = trial.imported.get("source", "an import") if isinstance(trial.imported, dict) else "an import"
        out.append(TrialWarning("imported", f"from {source}"))
    few, wide, short, waves = [], [], [], []
    for i, objective in enumerate(data.objectives):
        m = trial.objective_measure(objective, i)
        if m is None:
            continue
        if m.n is not None and m.n < MIN_SAMPLES:
            few.append(f"{objective.name}: n={m.n}")
        if m.relative is not None and m.relative > MAX_RELATIVE_HALF_WIDTH:
            wide.append(f"{objective.name}: +-{m.relative:.1%}")
        level = trial.level(objective.concurrency) if objective.concurrency is not None else None
        if objective.metric in _STEADY_METRICS and level and level.get("steady_short") is True:
            share = level.get("steady_share")
            shown = f"{share:.0%} of the run" if isinstance(share, (int, float)) else "no window"
            short.append(f"{objective.name}: steady {shown}")
        if objective.metric in _STEADY_METRICS and m.method == SHORT_WINDOW:
            waves.append(f"{objective.name}: +-{m.relative:.1%} from sub-wave slices" if m.relative else objective.name)
    if few:
        out.append(TrialWarning("few-samples", "; ".join(few)))
    if wide:
        out.append(TrialWarning("high-variance", "; ".join(wide)))
    if short:
        out.append(TrialWarning("short-steady", "; ".join(short)))
    if waves:
        out.append(TrialWarning("few-waves", "; ".join(waves)))
    errors = [
        f"C={c}: {lvl.get('n_errors')} of {lvl.get('n_requests')}"
        for c, lvl in sorted(trial.bench.items())
        if (lvl.get("n_errors") or 0) > 0
    ]
    if errors:
        out.append(TrialWarning("errors", "; ".join(errors)))
    retractions = (trial.startup.get("runtime_events") or {}).get("retractions") or 0
    if retractions:
        out.append(TrialWarning("kv-retraction", f"{retractions} retraction(s)"))
    return out


def study_warnings(data: StudyData, baseline: TrialView | None) -> list[str]:
    """Sentences about the study as a whole (empty when nothing stands out)."""
    notes: list[str] = []
    if not data.measured:
        notes.append("no configuration has been measured successfully yet; run autospec optimize")
    elif len(data.measured) < 5:
        notes.append(f"only {len(data.measured)} configuration(s) measured; the front may change with more trials")
    if baseline is None:
        notes.append(
            "no baseline trial: measure your current configuration with autospec optimize --baseline, "
            "or name one with --baseline-trial N, to get ratios"
        )
    failed = [t for t in data.of_kind("failed") if t.outcome != WITHDRAWN]
    if failed:
        notes.append(f"{len(failed)} trial(s) failed or were interrupted; autospec optimize retries them")
    withdrawn = [t for t in data.of_kind("failed") if t.outcome == WITHDRAWN]
    if withdrawn:
        notes.append(
            f"{len(withdrawn)} trial(s) withdrawn before launch: another worker had claimed the last launches "
            "or the same configuration (docs/distributed.md); not failures, not retried"
        )
    running = data.of_kind("running")
    if running:
        notes.append(f"{len(running)} trial(s) still running or queued; the front can still change")
    notes.extend(stall_notes(data))
    notes.extend(race_notes(data))
    notes.extend(launch_notes(data))
    return notes


def race_notes(data: StudyData) -> list[str]:
    """Race stops (`autospec.study.racing`) that the drained level did not confirm: the
    trial's figures stand as measured, and it is not taken as beaten."""
    found = []
    for trial in data.measured:
        for c, level in sorted(trial.bench.items()):
            check = race_check(level)
            if check in ("contradicted", "unchecked"):
                found.append(f"trial {trial.number} C={c} ({check})")
    if not found:
        return []
    return [
        "race stops that the drained level did not confirm (the level was stopped early as beaten, its final "
        f"figures do not show it; they stand as measured): {', '.join(found)}"
    ]


def stall_notes(data: StudyData) -> list[str]:
    """Which aggregate objectives left a one-off stall out of their steady window."""
    left_out = []
    for trial in data.measured:
        for objective in data.objectives:
            level = trial.level(objective.concurrency) if objective.concurrency is not None else None
            seconds = (level or {}).get("steady_transient_s") or 0
            if objective.metric in _STEADY_METRICS and seconds > 0:
                left_out.append(f"trial {trial.number} {objective.name} ({seconds:.1f} s)")
    if not left_out:
        return []
    return [
        "one-off stalls left out of steady windows (a pause that did not come back, as when a server meets a "
        f"batch shape for the first time; docs/figures.md): {', '.join(left_out)}"
    ]


def _measured(spread: LogSpread) -> str:
    """Where a comparison's between-launch spread comes from: this study's relaunches and
    those of other studies on the same hardware and target (`autospec.records.history`)."""
    here = f"measured {spread.launch_sd():.1%} over {spread.df} df" if spread.df else "not measured here"
    past = spread.history
    if past is None:
        return here
    studies = f"{past.studies} other stud{'y' if past.studies == 1 else 'ies'}"
    return f"{here}; {past.sd:.1%} over {past.df} df in {studies} on this hardware"


def _paired_note(data: StudyData) -> list[str]:
    """The comparisons' own spread (`autospec.metrics.paired`): measured over the positions a
    configuration's launches share, so the per-request spread is not in it."""
    spreads = sorted(data.pooled.log_spread.items())
    paired = [f"+-{s.shrunk()[0]:.1%} (1 sd) on {data.objectives[i].name} ({_measured(s)})" for i, s in spreads]
    if not paired:
        return []
    return [
        "comparisons (the x ratios) pair launches over the requests or waves both measured, so the per-request "
        f"spread drops out; the between-launch spread in their intervals, with a prior of +-{PRIOR_SD:.0%}: "
        f"{', '.join(paired)}"
    ]


def launch_notes(data: StudyData) -> list[str]:
    """What is known about the scatter between launches of the same flags."""
    if not data.front:
        return []
    if not data.spread:
        return [
            "intervals are those of one launch; the same flags also vary from launch to launch (graph "
            "capture, memory layout, clocks): autospec optimize --confirm K relaunches front configurations "
            "to measure that and include it",
            *_paired_note(data),
        ]
    # the intervals use the measured cv shrunk towards a prior (`Spread.shrunk`): few relaunches that
    # happen to agree read 0.0%, which no interval assumes
    parts = [f"+-{s.shrunk()[0]:.1%} (1 sd) on {name} (measured {s.cv:.1%} over {s.df} df)" for name, s in data.spread.items()]
    relaunched = max(s.configurations for s in data.spread.values())
    notes = [
        f"between-launch spread, from relaunches of {relaunched} configuration(s) and a prior of +-{PRIOR_SD:.0%}: "
        f"{', '.join(parts)}; included in every figure's interval shown",
        *_paired_note(data),
    ]
    dominated = [t for t in data.front if t.between_dominates]
    if dominated:
        names = sorted({name for t in dominated for name in t.between_dominates})
        notes.append(
            f"on {len(dominated)} front configuration(s) the launch-to-launch spread exceeds the measuring "
            f"error ({', '.join(names)}): relaunching them (--confirm K), not measuring longer, narrows "
            "their intervals"
        )
    return notes
