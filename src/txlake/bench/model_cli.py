"""``txlake bench model``: predicted commit throughput from the simulation in :mod:`txlake.bench.model`.

Nothing is measured: the model is first checked against the throughputs measured on this machine
(:data:`txlake.bench.model.MEASURED`), then predicts committed transactions/s for each writer count on
SeaweedFS here and on S3-like latencies, for the old protocol (serial claims), the new one (group
commit) and delta-rs. Writes ``model.json`` (parameters, calibration errors, every prediction with its
requests per commit and where the writers' time goes) and ``model.png``.
"""

from __future__ import annotations

import argparse
import json
import textwrap
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from txlake.bench.args import positive, positive_float
from txlake.bench.model import (
    KINDS,
    PROTOCOLS,
    TOLERANCE,
    CalibrationPoint,
    ClientCosts,
    Environment,
    Prediction,
    Protocol,
    calibrate,
    counter_kinds,
    limits,
    predict,
    s3,
    seaweedfs_here,
)
from txlake.bench.report import machine_info
from txlake.cli.output import console_for

NAME = "model"
HELP = "predicted commit throughput (simulation calibrated here): old vs new protocol, SeaweedFS and S3"
DEFAULT_WRITERS = (1, 2, 4, 8, 16, 32)
DEFAULT_S3 = ((20.0, 10.0), (50.0, 20.0))


def s3_latency(text: str) -> tuple[float, float]:
    """``PUT_MS,GET_MS`` -> (put, get)."""
    put, sep, get = text.partition(",")
    try:
        values = (float(put), float(get))
    except ValueError:
        values = (0.0, 0.0)
    if not sep or min(values) <= 0:
        raise argparse.ArgumentTypeError(f"expected PUT_MS,GET_MS (positive numbers), got {text!r}")
    return values


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--writers",
        type=positive,
        nargs="+",
        default=list(DEFAULT_WRITERS),
        metavar="N",
        help="writer counts (default: " + " ".join(map(str, DEFAULT_WRITERS)) + ")",
    )
    parser.add_argument(
        "--s3",
        type=s3_latency,
        action="append",
        default=None,
        metavar="PUT_MS,GET_MS",
        help="an S3 environment: latency of a PUT and of a GET/HEAD/LIST in ms (repeatable; default 20,10 and 50,20)",
    )
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=None,
        help="simulated seconds per run after the warm-up (default: 4 on SeaweedFS, 30 on S3; at most 4 for the "
        "calibration runs)",
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed (the simulation is deterministic for it)")


def _requests(values: dict[str, float]) -> str:
    return " ".join(f"{k} {v:.1f}" for k, v in values.items() if v > 0.005)


def calibration_table(points: Sequence[CalibrationPoint]) -> Table:
    table = Table(title=f"calibration against SeaweedFS on this machine (tolerance {TOLERANCE:.0%})")
    for column in ("protocol", "writers", "measured tx/s", "model tx/s", "error"):
        table.add_column(column, justify="left" if column == "protocol" else "right")
    table.add_column("requests/commit measured")
    table.add_column("requests/commit model")
    for p in points:
        style = "green" if abs(p.error) <= TOLERANCE else "red"
        measured = _requests(dict(p.measured.requests)) or "-"
        model = _requests(p.requests())
        if p.measured.group_size is not None:
            measured += f", group {p.measured.group_size:.1f}"
            model += f", group {p.predicted.group_size:.1f}"
        table.add_row(
            p.measured.protocol,
            str(p.measured.writers),
            f"{p.measured.tx_per_s:.0f}",
            f"{p.predicted.tx_per_s:.1f}",
            f"[{style}]{p.error:+.0%}[/{style}]",
            measured,
            model,
        )
    return table


def prediction_tables(predictions: Sequence[Prediction], envs: Sequence[Environment]) -> list[Table]:
    """Per environment: tx/s of each protocol by writer count, and what limits old and new."""
    by_key = {(p.environment.name, p.protocol, p.writers): p for p in predictions}
    tables = []
    for env in envs:
        table = Table(title=f"predicted tx/s -- {env.description}")
        table.add_column("writers", justify="right")
        for column in ("old", "new", "new/old", "delta-rs"):
            table.add_column(column, justify="right")
        table.add_column("old: limited by")
        table.add_column("new: limited by")
        for n in sorted({p.writers for p in predictions if p.environment is env}):
            old, new, drs = (by_key.get((env.name, protocol, n)) for protocol in ("old", "new", "delta-rs"))
            ratio = new.result.tx_per_s / old.result.tx_per_s if old and new and old.result.tx_per_s else None
            table.add_row(
                str(n),
                f"{old.result.tx_per_s:.1f}" if old else "",
                f"{new.result.tx_per_s:.1f}" if new else "",
                f"{ratio:.2f}x" if ratio is not None else "",
                f"{drs.result.tx_per_s:.1f}" if drs else "",
                limits(old.result, env) if old else "",
                limits(new.result, env) if new else "",
            )
        tables.append(table)
    return tables


def environment_json(env: Environment, client: ClientCosts) -> dict[str, Any]:
    return {
        "name": env.name,
        "description": env.description,
        "cores": env.cores,
        "server_parallelism": env.server_parallelism,
        "serialized_conditional_puts": env.serialized_conditional_puts,
        "jitter": env.jitter,
        "idle_wall_ms": {k: round(env.wall_ms(k, client), 4) for k in KINDS},
        "network_ms": dict(env.costs.network),
        "service_ms": {k: round(v, 4) for k, v in env.costs.service.items()},
        "server_cpu_ms": dict(env.costs.server_cpu),
    }


def prediction_json(p: Prediction) -> dict[str, Any]:
    r = p.result
    return {
        "environment": p.environment.name,
        "protocol": p.protocol,
        "writers": p.writers,
        "tx_per_s": r.tx_per_s,
        "commits": r.commits,
        "simulated_seconds": r.seconds,
        "requests_per_commit": counter_kinds(r),
        "requests_per_commit_by_cost": {k: r.per_commit(k) for k in KINDS},
        "rebases_per_commit": r.rebases / r.commits if r.commits else None,
        "group_size": r.group_size if r.versions else None,
        "cpu_utilization": r.cpu_utilization,
        "writer_time_shares": r.time_shares(),
        "limited_by": limits(r, p.environment),
    }


def calibration_json(c: CalibrationPoint) -> dict[str, Any]:
    return {
        "protocol": c.measured.protocol,
        "writers": c.measured.writers,
        "measured_tx_per_s": c.measured.tx_per_s,
        "predicted_tx_per_s": c.predicted.tx_per_s,
        "error": c.error,
        "within_tolerance": abs(c.error) <= TOLERANCE,
        "measured_requests_per_commit": dict(c.measured.requests),
        "predicted_requests_per_commit": c.requests(),
        "measured_group_size": c.measured.group_size,
        "predicted_group_size": c.predicted.group_size,
    }


def report_json(
    points: Sequence[CalibrationPoint],
    predictions: Sequence[Prediction],
    envs: Sequence[Environment],
    client: ClientCosts,
    *,
    seed: int,
    seconds: float | None,
) -> dict[str, Any]:
    return {
        "benchmark": NAME,
        "metric": "predicted committed transactions/s",
        "unit": "tx/s",
        "machine": machine_info(),
        "parameters": {
            "seed": seed,
            "seconds": seconds,
            "client_costs_ms": asdict(client),
            "environments": [environment_json(env, client) for env in envs],
        },
        "calibration": {"tolerance": TOLERANCE, "points": [calibration_json(c) for c in points]},
        "predictions": [prediction_json(p) for p in predictions],
    }


def plot(
    points: Sequence[CalibrationPoint], predictions: Sequence[Prediction], envs: Sequence[Environment], path: Path
) -> None:
    """One panel per environment: tx/s against writers per protocol; the measured points on the local one."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # lazily: see txlake.bench.report
    from matplotlib.figure import Figure

    colors = {"old": "#1f77b4", "new": "#ff7f0e", "delta-rs": "#7f7f7f"}
    fig = Figure(figsize=(5.0 * len(envs), 4.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(envs), squeeze=False)[0]
    for ax, env in zip(axes, envs, strict=True):
        for protocol in PROTOCOLS:
            series = sorted(
                (p.writers, p.result.tx_per_s) for p in predictions if p.environment is env and p.protocol == protocol
            )
            if not series:
                continue
            xs, ys = zip(*series, strict=True)
            style = "--" if protocol == "delta-rs" else "-"
            ax.plot(xs, ys, style, marker="o", markersize=4, color=colors[protocol], label=f"{protocol} (model)")
        if env.name == "seaweedfs-here":
            for c in points:
                ax.plot(
                    c.measured.writers,
                    c.measured.tx_per_s,
                    "x",
                    markersize=9,
                    markeredgewidth=2,
                    color=colors[c.measured.protocol],
                    label=f"{c.measured.protocol} (measured)",
                )
        ax.set_xscale("log", base=2)
        ticks = sorted({p.writers for p in predictions})
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("writers")
        ax.set_ylabel("committed transactions/s")
        ax.set_ylim(bottom=0)
        ax.set_title(textwrap.fill(env.description, 48), fontsize=9)
        ax.grid(alpha=0.3)
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles, strict=True))
        ax.legend(unique.values(), unique.keys(), fontsize=8)
    fig.suptitle("txlake commit throughput model: serial claims (old) vs group commit (new)")
    fig.savefig(path, dpi=110)


def run(args: argparse.Namespace) -> int:
    console = console_for()
    client = ClientCosts()
    envs: list[Environment] = [seaweedfs_here(client)]
    envs += [s3(put, get) for put, get in (args.s3 or DEFAULT_S3)]
    writers = sorted(set(args.writers))
    protocols: tuple[Protocol, ...] = PROTOCOLS
    with console.status("simulating the calibration points"):
        points = calibrate(envs[0], client=client, seed=args.seed, seconds=min(args.seconds or 4.0, 4.0))
    console.print(calibration_table(points))
    with console.status("simulating") as status:

        def progress(p: Prediction) -> None:
            status.update(f"simulated {p.environment.name} {p.protocol} {p.writers} writers")

        predictions = predict(
            envs, writers, protocols, client=client, seconds=args.seconds, seed=args.seed, progress=progress
        )
    for table in prediction_tables(predictions, envs):
        console.print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    json_path, png_path = out / f"{NAME}.json", out / f"{NAME}.png"
    doc = report_json(points, predictions, envs, client, seed=args.seed, seconds=args.seconds)
    json_path.write_text(json.dumps(doc, indent=2) + "\n")
    plot(points, predictions, envs, png_path)
    console.print(f"wrote {json_path} and {png_path}")
    return 0
