#!/usr/bin/env python3
"""Per-partition load of each skewjoin strategy on the skewed workloads, one SVG per workload and
join type: input records and output rows per partition, side by side for `auto` and `shuffle`.

Reads the --metrics JSON files that run.py keeps (metrics/<workload>-<join>-skewjoin-<strategy>.json)
and writes plots/<workload>-<join>.svg. Run run.py first; with --partitions 8 there the bars show
more than the two partitions of one per worker.
"""

import argparse
import glob
import json
import os
from collections import defaultdict

import matplotlib

matplotlib.use("svg")  # files only, no display needed
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PANELS = [("input_records", "input records"), ("output_rows", "output rows")]


def load(metrics_dir, skip):
    """{(workload, join): {strategy label: metrics}} for every skewed workload."""
    runs = defaultdict(dict)
    for path in sorted(glob.glob(os.path.join(metrics_dir, "*-skewjoin-*.json"))):
        stem = os.path.basename(path)[: -len(".json")]
        head, strategy = stem.rsplit("-skewjoin-", 1)
        workload, how = head.rsplit("-", 1)
        if workload in skip:
            continue
        with open(path) as f:
            metrics = json.load(f)
        # `auto` names the strategy it chose, which is what the bars show.
        label = strategy if strategy == metrics["strategy"] else f"{strategy} ({metrics['strategy']})"
        runs[(workload, how)][label] = metrics
    return runs


def plot(workload, how, strategies, out):
    fig, axes = plt.subplots(1, len(PANELS), figsize=(11, 4))
    width = 0.8 / len(strategies)
    for ax, (field, title) in zip(axes, PANELS):
        for i, (label, metrics) in enumerate(sorted(strategies.items())):
            loads = [p[field] for p in metrics["per_partition"]]
            mean = sum(loads) / len(loads) if loads else 0
            imbalance = max(loads) / mean if mean else 1.0
            xs = [p + (i - (len(strategies) - 1) / 2) * width for p in range(len(loads))]
            ax.bar(xs, loads, width, label=f"{label}: max/mean {imbalance:.2f}")
        ax.set_title(title)
        ax.set_xlabel("partition")
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.legend(fontsize="small")
    fig.suptitle(f"{workload}, {how} join: per-partition load")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--metrics", default=os.path.join(HERE, "metrics"), help="run.py's metrics folder")
    parser.add_argument("--out", default=os.path.join(HERE, "plots"), help="where the SVG files go")
    parser.add_argument("--skip", default="uniform", help="comma-separated workloads not to draw (not skewed)")
    args = parser.parse_args()
    runs = load(args.metrics, set(args.skip.split(",")))
    if not runs:
        raise SystemExit(f"no skewjoin metrics in {args.metrics}: run run.py first")
    os.makedirs(args.out, exist_ok=True)
    for (workload, how), strategies in sorted(runs.items()):
        out = os.path.join(args.out, f"{workload}-{how}.svg")
        plot(workload, how, strategies, out)
        print(out)


if __name__ == "__main__":
    main()
