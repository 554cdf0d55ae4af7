"""The production mix's printed report: latency per mode and kind, rates, CPU per event, memory and size over
time with their slopes, where it saturated, and the verdict. Answers whether the run was sound."""

from __future__ import annotations

import argparse
import math
import re
from collections import Counter
from pathlib import Path

from bench.mix_app import KEYED, PARALLEL, SERIAL
from bench.mix_load import Acks
from bench.mix_meter import Meter, between, cpu_used, machine_cores, peak_cores, slope_per_minute
from bench.mix_upgrade import Replayed
from bench.mix_verdict import KEY_SLOTS, Verdict
from bench.mix_world import World

MODES = {SERIAL: "serial", KEYED: "keyed", PARALLEL: "parallel"}
KINDS = ("single", "bulk", "captured")
# What one process of each kind can use: a Python process runs on about one core; the servers on all of them.
SINGLE_CORE = ("api-", "worker-", "writers", "bench")


def _s(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _latency_table(verdict: Verdict) -> None:
    print(
        f"  {'mode':<9} {'kind':<9} {'events':>9} {'reached':>9} {'in 2 runs':>9} {'p50 s':>8} {'p99 s':>8}"
        f" {'p99.9 s':>8}"
    )
    for listener, mode in MODES.items():
        for kind in KINDS:
            f = verdict.figures.get((listener, kind))
            if f is None:
                continue
            print(
                f"  {mode:<9} {kind:<9} {f.expected:>9,} {f.reached:>9,} {f.twice:>9,} {_s(f.p50):>8}"
                f" {_s(f.p99):>8} {_s(f.p999):>8}"
            )


def _ceiling(name: str) -> float:
    return 1.0 if name.startswith(SINGLE_CORE) else float(machine_cores())


def report(
    *,
    args: argparse.Namespace,
    argv: list[str],
    world: World,
    meter: Meter,
    acks: list[Acks],
    verdict: Verdict,
    began: float,
    load_end: float,
    settled: float,
    upgrade_span: tuple[float, float],
    upgrade_from: str | None,
) -> bool:
    offered = {k: sum(a.offered[k] for a in acks) for k in KINDS}
    acked = {
        "single": sum(len(a.events["single"]) for a in acks),
        "bulk": sum(len(a.events["bulk"]) for a in acks),
        "captured": sum(len(a.rows) for a in acks),
    }
    events = sum(acked.values())
    load = load_end - began
    span = settled - began
    print(f"production mix: python -m bench.production_mix {' '.join(argv)}")
    print(
        f"  {args.sessions} sessions, {args.apis} APIs, {args.workers} workers, {args.writers} writer processes;"
        f" {args.rate:g} events/s for {args.minutes:g} min, x{args.burst_factor:g} for {args.burst_seconds:g} s"
        f" every {args.burst_every:g} s; load {load:.0f} s, every event in a run {settled - load_end:.0f} s later"
    )
    if world.faults:
        print(f"  faults ({len(world.faults)}): {', '.join(world.faults)}")
    if upgrade_from:
        print(
            f"  upgrade from {upgrade_from}: {upgrade_span[0] - began:.0f} s to {upgrade_span[1] - began:.0f} s"
            f" into the load, parts replaced: {', '.join(f'{n} at {t - began:.0f} s' for n, t in world.upgraded)}"
        )
    print("  restarts: " + ", ".join(f"{p.name} {p.starts - 1}" for p in world.parts))
    print()
    print("writes (events)          offered     acknowledged   per second")
    for kind in KINDS:
        print(f"  {kind:<20} {offered[kind]:>12,} {acked[kind]:>14,} {acked[kind] / load:>12,.1f}")
    print(
        f"  {'all':<20} {sum(offered.values()):>12,} {events:>14,} {events / load:>12,.1f}"
        f"   (dropped unsent {sum(a.dropped for a in acks):,}, retries {sum(a.retries for a in acks):,})"
    )
    print()
    print("commit to run start, per mode and kind of write (every event, bursts and faults included)")
    _latency_table(verdict)
    print()
    print(f"runs and events per second, from the first write until every event was in a run ({span:.0f} s)")
    for listener, mode in MODES.items():
        runs = verdict.runs.get(listener, 0)
        reached = sum(f.reached for (name, _), f in verdict.figures.items() if name == listener)
        print(
            f"  {mode:<9} {runs:>9,} runs {runs / span:>9.1f} runs/s {reached / span:>10,.1f} events/s"
            f" {reached / max(runs, 1):>8.1f} events a run"
        )
    samples = between(meter.samples, began, settled)
    used = cpu_used(samples)
    platform = sum(
        v for k, v in used.items() if k.startswith(("api-", "worker-")) or k in ("Temporal server", "PostgreSQL")
    )
    peaks = peak_cores(samples, meter.interval)
    during = cpu_used(between(meter.samples, began, load_end))
    print()
    print(f"CPU, from the first write until every event was in a run, per acknowledged event ({events:,});")
    print("cores: on average over that span, and over the load alone; peak: its busiest interval")
    print(f"  {'part':<32} {'CPU s':>9} {'us/event':>9} {'cores':>7} {'load':>6} {'peak':>6} {'at s':>6}")
    for name, seconds in sorted(used.items(), key=lambda kv: -kv[1]):
        peak, at = peaks.get(name, (float("nan"), 0.0))
        print(
            f"  {name:<32} {seconds:>9.1f} {seconds / max(events, 1) * 1e6:>9.1f} {seconds / span:>7.2f}"
            f" {during.get(name, 0.0) / load:>6.2f} {peak:>6.2f} {at:>6.0f}"
        )
    print(
        f"  {'the platform (APIs, workers, Temporal, PostgreSQL)':<32} {platform:>9.1f}"
        f" {platform / max(events, 1) * 1e6:>9.1f} {platform / span:>7.2f}"
    )
    print()
    print("memory (MB of resident memory; PostgreSQL: its backends' private memory) and size, over the load")
    loaded = between(meter.samples, began, load_end)
    names = [n for n in loaded[-1].rss_mb] if loaded else []
    print(f"  {'part':<32} {'first':>8} {'last':>8} {'max':>8} {'MB/min':>8}")
    for name in names:
        values = [(s.at, s.rss_mb.get(name, 0.0)) for s in loaded if s.rss_mb.get(name)]
        if values:
            print(
                f"  {name:<32} {values[0][1]:>8.0f} {values[-1][1]:>8.0f} {max(v for _, v in values):>8.0f}"
                f" {slope_per_minute(values):>8.2f}"
            )
    for label, attr in (("database (pg_database_size)", "database_mb"), ("Temporal's SQLite file", "temporal_mb")):
        values = [(s.at, getattr(s, attr)) for s in loaded if getattr(s, attr) is not None]
        if values:
            print(
                f"  {label:<32} {values[0][1]:>8.0f} {values[-1][1]:>8.0f} {max(v for _, v in values):>8.0f}"
                f" {slope_per_minute(values):>8.2f}"
            )
    print()
    print("over time (s from the first write: events written, events waiting in lanes, runs started, database MB)")
    step = max(1, len(samples) // 20)
    for s in samples[::step]:
        if s.events is None:
            print(f"  {s.at - began:>6.0f} s  (the database did not answer)")
            continue
        print(
            f"  {s.at - began:>6.0f} s {s.events:>10,} {s.queued or 0:>9,} {s.runs or 0:>9,} {s.database_mb or 0:>8.0f}"
        )
    queued = [(s.at, float(s.queued)) for s in loaded if s.queued is not None]
    print(f"  events waiting in lanes: slope over the load {slope_per_minute(queued):,.0f} a minute")
    print()
    print("where it saturated: each part's busiest interval against what it can use (a Python process one core)")
    ranked = sorted(peaks.items(), key=lambda kv: -kv[1][0] / _ceiling(kv[0]))
    for name, (peak, at) in ranked[:6]:
        print(f"  {name:<32} {peak:>5.2f} of {_ceiling(name):.0f} cores ({peak / _ceiling(name):>4.0%}) at {at:.0f} s")
    print()
    print("accounting")
    print(
        f"  matching events that reached no run: {verdict.missing}"
        + (f" (first: {verdict.missing_first})" if verdict.missing else "")
    )
    print(f"  events in a run of a listener that does not take them: {verdict.extra}")
    print(f"  runs not ended: {verdict.open_runs}; events still waiting in lanes: {verdict.queued}")
    print(
        f"  acknowledged events not in the stream: {verdict.acked_not_in_stream}; acknowledged rows not in their"
        f" table: {verdict.acked_rows_not_in_table}; rows without exactly one event: {verdict.rows_without_one_event}"
    )
    print(f"  serial or keyed runs that overlapped another of their lane: {verdict.overlaps}")
    print(f"  most keyed runs at once in a session: {verdict.keyed_peak} (slots: {KEY_SLOTS})")
    sound = verdict.sound and verdict.queued == 0
    print(f"  {'OK' if sound else 'FAILED'}", flush=True)
    return sound


def upgrade_report(upgrade_from: str, replayed: Replayed, fixtures: list[Path] | None) -> bool:
    """The upgrade's own lines, printed once its histories are replayed; answers whether none was nondeterministic."""
    print(
        f"  replayed on this code: {replayed.lanes} lanes open during the upgrade, {replayed.runs} runs around"
        f" it; nondeterministic: {len(replayed.failures)}"
    )
    for run_id, failure in list(replayed.failures.items())[:5]:
        print(f"    {run_id}: {failure[:300]}")
    if fixtures is not None:
        print(f"  kept {len(fixtures)} histories of {upgrade_from} in tests/replay/histories (previous-*.json)")
    print(f"  {'OK' if not replayed.failures else 'FAILED'}")
    return not replayed.failures


# A log line's shape: its message with the time, numbers, ids and quoted text taken out, so repeats group.
# A failed activity's line names its type among ids: kept, so the app's activities and the platform's tell apart.
_ACTIVITY = re.compile(r"\(\{.*'activity_type': '([\w.]+)'.*\}\)")
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \S+ ")
_VARYING = re.compile(r"\b(ses|itm)_[0-9a-f]{6,}|\b(exe|lane|run):[\w:./-]+|0x[0-9a-f]+|\d+(\.\d+)?|'[^']*'")


def logs_report(folder: Path, top: int = 5) -> None:
    """What the parts said over the run: per log, its warnings and tracebacks, and the most repeated warnings.
    An outage is to be said in a few lines, not in a line or a traceback an attempt (docs/decisions.md)."""
    print("the parts' logs (warnings and errors, tracebacks, the most repeated):")
    for path in sorted(folder.glob("*.log")):
        lines = path.read_text(errors="replace").splitlines()
        said = [line for line in lines if " WARNING " in line or " ERROR " in line]
        tracebacks = sum(line.startswith("Traceback") for line in lines)
        counts = f"{len(said):>7,} warnings and errors  {tracebacks:>6,} tracebacks  {len(lines):>8,} lines"
        print(f"  {path.stem:<12} {counts}")
        shapes = Counter(_VARYING.sub("#", _ACTIVITY.sub(r"activity \1 ", _STAMP.sub("", line))) for line in said)
        for shape, count in shapes.most_common(top):
            print(f"    {count:>7,}  {shape[:150]}")
