"""Shared benchmark reporting: result rows, a rich ratio table, and JSON + PNG files with machine info.

Every workload measures txlake and a baseline (delta-rs, Spark, ...) in the same run and reports
``txlake / baseline`` per configuration, so lower-is-better metrics (times, latencies) give ratios
where < 1 means txlake is faster.
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from txlake.cli.output import console_for

CANDIDATE = "txlake"
REPORTED_PACKAGES = ("txlake", "pyarrow", "deltalake", "obstore", "pyspark")


@dataclass(frozen=True, slots=True)
class BenchRow:
    """One configuration: txlake's and the baseline's summary value (e.g. median ms) and the raw samples."""

    config: str
    txlake: float
    baseline: float
    params: Mapping[str, Any] = field(default_factory=dict)
    txlake_samples: tuple[float, ...] = ()
    baseline_samples: tuple[float, ...] = ()

    @classmethod
    def from_samples(
        cls,
        config: str,
        txlake_samples: Sequence[float],
        baseline_samples: Sequence[float],
        params: Mapping[str, Any] | None = None,
    ) -> BenchRow:
        """A row whose values are the medians of the samples."""
        if not txlake_samples or not baseline_samples:
            raise ValueError("both sides need at least one sample")
        return cls(
            config,
            statistics.median(txlake_samples),
            statistics.median(baseline_samples),
            dict(params or {}),
            tuple(txlake_samples),
            tuple(baseline_samples),
        )

    @property
    def ratio(self) -> float:
        """``txlake / baseline`` (``inf`` when the baseline measured zero)."""
        return self.txlake / self.baseline if self.baseline > 0 else math.inf


@dataclass(frozen=True, slots=True)
class BenchReport:
    """A whole benchmark run: what was measured, against which baseline, and one row per configuration."""

    name: str
    metric: str
    unit: str
    baseline: str
    rows: tuple[BenchRow, ...]
    target_ratio: float | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)

    def within_target(self, row: BenchRow) -> bool | None:
        return None if self.target_ratio is None else row.ratio <= self.target_ratio


def machine_info() -> dict[str, Any]:
    """Where the numbers come from: CPUs, Python, platform, package versions, and when."""
    versions: dict[str, str | None] = {}
    for package in REPORTED_PACKAGES:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "cpu_count": os.cpu_count(),
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "versions": versions,
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def report_to_json(report: BenchReport) -> dict[str, Any]:
    """The JSON document of a report (machine info stamped now)."""
    return {
        "benchmark": report.name,
        "metric": report.metric,
        "unit": report.unit,
        "candidate": CANDIDATE,
        "baseline": report.baseline,
        "ratio": f"{CANDIDATE} / {report.baseline}",
        "target_ratio": report.target_ratio,
        "parameters": dict(report.parameters),
        "machine": machine_info(),
        "rows": [
            {
                "config": row.config,
                "params": dict(row.params),
                CANDIDATE: row.txlake,
                "baseline": row.baseline,
                "ratio": _finite(row.ratio),
                "within_target": report.within_target(row),
                f"{CANDIDATE}_samples": list(row.txlake_samples),
                "baseline_samples": list(row.baseline_samples),
            }
            for row in report.rows
        ],
    }


def plot_report(report: BenchReport, path: Path) -> None:
    """Grouped bars (txlake vs baseline) per configuration, each pair annotated with its ratio."""
    # Imported here, not at module level: every ``txlake`` command imports txlake.bench to build its
    # parser, and matplotlib costs a noticeable fraction of a second to import.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    rows = report.rows
    width = 0.38
    fig = Figure(figsize=(max(6.0, 1.6 * len(rows) + 2.0), 4.8), layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    xs = list(range(len(rows)))
    ax.bar([x - width / 2 for x in xs], [r.txlake for r in rows], width, label=CANDIDATE, color="#1f77b4")
    ax.bar([x + width / 2 for x in xs], [r.baseline for r in rows], width, label=report.baseline, color="#ff7f0e")
    values = [v for r in rows for v in (r.txlake, r.baseline) if v > 0]
    if values and max(values) / min(values) > 50:
        ax.set_yscale("log")
    for x, row in zip(xs, rows, strict=True):
        top = max(row.txlake, row.baseline)
        ok = report.within_target(row)
        ax.annotate(
            f"{row.ratio:.2f}x",
            (x, top),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            va="bottom",
            fontsize=9,
            fontweight="bold",
            color="black" if ok is None else ("#2ca02c" if ok else "#d62728"),
        )
    ax.margins(y=0.15)
    ax.set_xticks(xs, [r.config for r in rows], rotation=20 if len(rows) > 4 else 0, ha="center", fontsize=8)
    ax.set_ylabel(f"{report.metric} ({report.unit})")
    target = f", target <= {report.target_ratio:g}x" if report.target_ratio is not None else ""
    ax.set_title(f"{report.name}: {CANDIDATE} vs {report.baseline} (ratio {CANDIDATE}/{report.baseline}{target})")
    ax.legend()
    fig.savefig(path, dpi=120)


def write_report(out_dir: str | os.PathLike[str], report: BenchReport) -> tuple[Path, Path]:
    """Write ``<name>.json`` and ``<name>.png`` into ``out_dir`` (created if needed); return both paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / f"{report.name}.json"
    png_path = out / f"{report.name}.png"
    json_path.write_text(json.dumps(report_to_json(report), indent=2) + "\n")
    plot_report(report, png_path)
    return json_path, png_path


def print_report(report: BenchReport, console: Console | None = None) -> None:
    """A rich table of every configuration with both values and the ratio (coloured against the target)."""
    console = console or console_for()
    target = f" (target <= {report.target_ratio:g}x)" if report.target_ratio is not None else ""
    table = Table(title=f"{report.name}: {report.metric}{target}")
    table.add_column("config")
    table.add_column(f"{CANDIDATE} ({report.unit})", justify="right")
    table.add_column(f"{report.baseline} ({report.unit})", justify="right")
    table.add_column(f"{CANDIDATE}/{report.baseline}", justify="right")
    for row in report.rows:
        ok = report.within_target(row)
        style = "" if ok is None else ("green" if ok else "red")
        ratio = f"[{style}]{row.ratio:.2f}x[/{style}]" if style else f"{row.ratio:.2f}x"
        table.add_row(row.config, f"{row.txlake:.2f}", f"{row.baseline:.2f}", ratio)
    console.print(table)


def run_against_delta_rs(name: str, out: str | os.PathLike[str], measure: Callable[[], BenchReport]) -> int:
    """The CLI end of a workload with delta-rs as its baseline: measure, print, write JSON + PNG; exit 2 with
    a hint when ``deltalake`` is not installed."""
    try:
        report = measure()
    except ModuleNotFoundError as exc:
        if exc.name != "deltalake":
            raise
        console_for(stderr=True).print(f"the {name} benchmark needs the baseline: pip install deltalake")
        return 2
    print_report(report)
    json_path, png_path = write_report(out, report)
    console_for().print(f"wrote {json_path} and {png_path}")
    return 0
