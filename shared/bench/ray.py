"""``python -m shared.bench ray``: Ray Data's overhead and memory against one process.

    python -m shared.bench ray --metric moverscore --pairs 20000          # 1 process x 2 threads vs Ray 2 actors x 1
    python -m shared.bench ray --metric delta_bleu --memory 10000,100000  # peak memory per worker and on the driver

The corpus is the first WMT15/16 pairs (development set), cycled to ``--pairs``, written to Parquet files by a
separate process first, so the Ray driver reads nothing itself. Each measurement runs in a fresh process
(:func:`shared.bench.harness.fresh`):

* ``process``: one ``movers.<metric>`` call with torch's 2 threads, timed after the encoder is loaded;
* ``ray``: a local cluster on the 2 cores, :func:`movers.integrations.ray.score` with 2 actors of 1 CPU (1 torch
  thread; a third logical CPU runs the Parquet reads and writes), both passes and the Parquet write of the
  scored rows, timed from the call to the written files (actors start and load their encoder inside that
  time). Peak memory: the driver's ``ru_maxrss``, and each worker process's ``VmHWM`` (peak resident set),
  read from /proc every 0.5 s while it lives, with the largest resident set and private memory (``RssAnon``:
  without the pages of Ray's shared object store that a worker has read) seen under each kind of task.

Besides wall time, each mode's CPU seconds (user + system: the process; the driver and every process of the
cluster), with waiting threads asleep rather than spinning (``OMP_WAIT_POLICY=PASSIVE`` in both modes): on a
machine shared with other work, wall time mostly measures the others, CPU seconds measure the work done.

The metric runs with its bench options (the call-level statistics on: per-call IDF for MoverScore).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from .harness import Runner, fresh, quiet_offline

__all__ = ["main", "measure", "write"]


def write(n: int, folder: str, rows_per_file: int = 5000) -> dict[str, Any]:
    """In a fresh process (the Ray driver reads nothing itself): the first `n` WMT15/16 pairs, cycled, as Parquet
    files of `rows_per_file` rows in `folder`."""
    import itertools

    import pyarrow as pa
    import pyarrow.parquet as pq

    from .data import load_dataset

    records = load_dataset("wmt15_16_da_seg_toen").records
    pairs = itertools.islice(itertools.cycle(records), n)
    for k in range(0, n, rows_per_file):
        chunk = list(itertools.islice(pairs, rows_per_file))
        table = pa.table({"prediction": [r["hypothesis"] for r in chunk],
                          "reference": [list(r["references"]) for r in chunk],
                          "position": list(range(k, k + len(chunk)))})
        pq.write_table(table, f"{folder}/part-{k // rows_per_file:06d}.parquet")
    return {"pairs": n}


class _Watch:
    """Every 0.5 s: the peak resident set (``VmHWM``) of each Ray worker running a map (tasks and actors), and
    the CPU time (user + system) of every process below this one (the cluster: GCS, raylet, workers), counted
    from the watch's start; what the watch itself costs is left out."""

    def __init__(self) -> None:
        self.peaks: dict[int, float] = {}
        self.cpu: dict[int, tuple[float, float]] = {}  # pid -> (at start or 0, last seen), seconds
        self.titles: dict[int, str] = {}  # pid -> what it last ran (a Ray worker's title, else its program)
        self.rss: dict[str, float] = {}  # a Ray worker's title -> the largest resident set seen under it, MB
        # the same for its private memory (RssAnon): the resident set also counts the pages of Ray's shared
        # object store that the worker has read, which Ray's memory guide says to leave out of a worker's heap
        self.anon: dict[str, float] = {}
        self.own = 0.0
        self._stop = threading.Event()
        self._first = True
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        """Stop; the cluster's CPU seconds since the start."""
        self._stop.set()
        self._thread.join()
        return sum(last - first for first, last in self.cpu.values())

    def by_kind(self) -> dict[str, float]:
        """CPU seconds by kind of process (a worker counts under the last thing it ran that is not IDLE)."""
        out: dict[str, float] = {}
        for pid, (first, last) in self.cpu.items():
            kind = self.titles.get(pid, "?")
            out[kind] = round(out.get(kind, 0.0) + last - first, 1)
        return dict(sorted(out.items(), key=lambda kv: -kv[1]))

    def _run(self) -> None:
        me, tick = os.getpid(), os.sysconf("SC_CLK_TCK")
        while True:
            begin = time.thread_time()
            parents, times = {}, {}
            for proc in Path("/proc").iterdir():
                if not proc.name.isdigit():
                    continue
                try:
                    fields = (proc / "stat").read_text().rsplit(")", 1)[1].split()
                except OSError:
                    continue
                pid = int(proc.name)
                parents[pid] = int(fields[1])
                times[pid] = (int(fields[11]) + int(fields[12])) / tick
            for pid, seconds in times.items():
                up = parents.get(pid)
                while up not in (None, 0, 1, me):
                    up = parents.get(up)
                if up != me:
                    continue
                first = self.cpu[pid][0] if pid in self.cpu else seconds if self._first else 0.0
                self.cpu[pid] = (first, seconds)
                self._peak(pid)
            self._first = False
            self.own += time.thread_time() - begin
            if self._stop.wait(0.5):
                return

    def _peak(self, pid: int) -> None:
        try:
            title = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            if title != "ray::IDLE" or pid not in self.titles:
                self.titles[pid] = title if title.startswith("ray::") else Path(title).name
            if not title.startswith("ray::") or "Map" not in title:
                return
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                self.peaks[pid] = max(self.peaks.get(pid, 0.0), int(line.split()[1]) / 1024.0)
            elif line.startswith("VmRSS:"):
                self.rss[title] = max(self.rss.get(title, 0.0), round(int(line.split()[1]) / 1024.0))
            elif line.startswith("RssAnon:"):
                self.anon[title] = max(self.anon.get(title, 0.0), round(int(line.split()[1]) / 1024.0))


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(mode: str, metric: str, folder: str, reader: str = "default") -> dict[str, Any]:
    """In a fresh process (:func:`shared.bench.harness.fresh`): the pairs in `folder` scored by one ``process``
    or by ``ray`` (a local cluster); seconds, CPU seconds and the peaks (see the module's docstring)."""
    quiet_offline()
    import movers
    from movers import metrics as registry

    options: dict[str, Any] = dict(registry.get(metric).bench_options)
    result: dict[str, Any] = {"mode": mode, "metric": metric}
    if mode == "process":
        import pyarrow.parquet as pq

        table = pq.read_table(folder)
        preds, refs = table.column("prediction").to_pylist(), table.column("reference").to_pylist()
        fn = getattr(movers, metric)
        fn(preds[:4], refs[:4], **{k: v for k, v in options.items() if k != "idf"})  # load the encoder
        start, cpu = time.perf_counter(), _cpu_seconds()
        fn(preds, refs, **options)
        result.update(seconds=time.perf_counter() - start, cpu_seconds=_cpu_seconds() - cpu, pairs=len(preds))
    else:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        import ray
        import ray.data

        from movers.integrations.ray import score

        # 3 logical CPUs on the 2 cores: the 2 scoring actors hold one each, the third runs the Parquet reads and
        # writes (with both CPUs held by actors, the reads that feed them could never be scheduled)
        ray.init(num_cpus=3, include_dashboard=False, log_to_driver=False, configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        if reader == "per-file":  # Ray's first Parquet reader: a read task per file, blocks of a file's rows
            ray.data.DataContext.get_current().use_datasource_v2 = False
        watch = _Watch()
        start, cpu = time.perf_counter(), _cpu_seconds()
        ds = ray.data.read_parquet(folder)
        scored = score(ds, metric, index="position", concurrency=2, num_cpus=1, **options)
        with tempfile.TemporaryDirectory() as target:
            scored.write_parquet(target)
            n = ray.data.read_parquet(target).count()
        seconds, driver = time.perf_counter() - start, _cpu_seconds() - cpu
        cluster = watch.stop()
        result.update(seconds=seconds, cpu_seconds=cluster + driver - watch.own, pairs=n, score=scored.score,
                      cpu_by_process={"driver": round(driver - watch.own, 1), **watch.by_kind()})
        ray.shutdown()
        result["worker_peak_mb"] = max(watch.peaks.values(), default=0.0)
        result["worker_peaks_mb"] = sorted(round(x) for x in watch.peaks.values())
        kinds: dict[str, float] = {}
        for pid, peak in watch.peaks.items():
            kind = watch.titles.get(pid, "?")
            kinds[kind] = round(max(kinds.get(kind, 0.0), peak))
        result["worker_peak_mb_by_kind"] = kinds
        result["worker_rss_mb_by_task"] = dict(sorted(watch.rss.items(), key=lambda kv: -kv[1]))
        result["worker_private_mb_by_task"] = dict(sorted(watch.anon.items(), key=lambda kv: -kv[1]))
        result["workers"] = len(watch.peaks)
    result["driver_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return result


def _measure(run: Runner, mode: str, metric: str, folder: str, reader: str = "default") -> dict[str, Any]:
    before = os.getloadavg()[0]
    result = run(measure, threads=2 if mode == "process" else 1, env={"OMP_WAIT_POLICY": "PASSIVE"}, mode=mode,
                   metric=metric, folder=folder, reader=reader)
    result["load_average"] = [before, os.getloadavg()[0]]  # the machine's 1-minute load before and after
    return result


def main(argv: list[str] | None = None, *, run: Runner = fresh) -> int:
    p = argparse.ArgumentParser(prog="python -m shared.bench ray", description=__doc__.split("\n")[0])
    from movers import metrics as registry

    p.add_argument("--metric", default=registry.DEMO, choices=registry.slugs(), help=f"default: {registry.DEMO}")
    p.add_argument("--pairs", type=int, default=20000, help="throughput corpus (0: skip)")
    p.add_argument("--memory", default="", help="comma-separated corpus sizes for the Ray memory runs")
    p.add_argument("--reader", choices=["default", "per-file"], default="default",
                   help="Ray's Parquet reader for the memory runs: its default (which reads a small data set in one "
                        "task, as one block of up to 128 MiB) or its first reader, a task per file of 5,000 pairs")
    p.add_argument("--json", default=None, help="write the results here too")
    args = p.parse_args(argv)
    results: dict[str, Any] = {"metric": args.metric, "reader": args.reader, "throughput": {}, "memory": {}}
    with tempfile.TemporaryDirectory() as tmp:
        if args.pairs:
            folder = f"{tmp}/t"
            os.makedirs(folder)
            run(write, n=args.pairs, folder=folder)
            one, ray_run = _measure(run, "process", args.metric, folder), _measure(run, "ray", args.metric, folder)
            overhead = ray_run["seconds"] / one["seconds"] - 1
            cpu_overhead = ray_run["cpu_seconds"] / one["cpu_seconds"] - 1
            results["throughput"] = {"process": one, "ray": ray_run, "overhead": overhead,
                                     "cpu_overhead": cpu_overhead}
            print(f"{args.metric}, {args.pairs} pairs: 1 process x 2 threads {one['pairs'] / one['seconds']:.1f} "
                  f"pairs/s ({one['cpu_seconds']:.0f} CPU s); Ray 2 actors x 1 thread "
                  f"{ray_run['pairs'] / ray_run['seconds']:.1f} pairs/s ({ray_run['cpu_seconds']:.0f} CPU s); "
                  f"Ray's overhead {100 * overhead:+.1f}% in wall time, {100 * cpu_overhead:+.1f}% in CPU time "
                  f"(load average {one['load_average'][0]:.1f}-{ray_run['load_average'][1]:.1f})", flush=True)
        for n in [int(x) for x in args.memory.split(",") if x]:
            folder = f"{tmp}/m{n}"
            os.makedirs(folder)
            run(write, n=n, folder=folder)
            m = _measure(run, "ray", args.metric, folder, args.reader)
            results["memory"][n] = m
            print(f"{args.metric}, {n} pairs on Ray: peak per worker {m['worker_peak_mb']:.0f} MB "
                  f"({m['workers']} worker processes: {m['worker_peaks_mb']}; private at most "
                  f"{max(m['worker_private_mb_by_task'].values(), default=0.0):.0f} MB), driver "
                  f"{m['driver_peak_mb']:.0f} MB, {m['pairs'] / m['seconds']:.1f} pairs/s", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0

