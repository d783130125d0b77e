"""`python -m shared.bench scale` runs its measurements in subprocesses and reports peak RSS per corpus size."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from .conftest import REPO, data_path


@pytest.mark.slow
def test_bench_scale_reports_flat_memory_for_a_streamed_metric(tmp_path):
    data_path("wmt15_16_da_seg_toen")  # the benchmark's workload
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "shared.bench", "scale", "--metric", "delta_bleu", "--base", "50",
                          "--sizes", "1,20", "--block-size", "25", "--processes", "", "--no-bertscore",
                          "--json", str(tmp_path / "scale.json")], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| delta_bleu | " in out.stdout and "| max/min |" in out.stdout
    row = json.loads((tmp_path / "scale.json").read_text())["rows"][0]
    assert row["stream_20x"] / row["stream_1x"] <= 1.2  # 1,000 pairs in blocks of 25: memory of one block


@pytest.mark.slow
def test_bench_speed_times_any_metric_beside_the_floor(tmp_path):
    """`python -m shared.bench speed` for a metric without an original to compare with (TWMD): its time, peak memory and
    ratio to the bare encoder forward pass, from fresh subprocesses."""
    data_path("wmt15_16_da_seg_toen")  # the benchmark's workload
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "shared"), os.environ.get("PYTHONPATH", "")]))
    out = subprocess.run([sys.executable, "-m", "shared.bench", "speed", "--metric", "twmd", "--pairs", "8",
                          "--repeats", "1", "--json", str(tmp_path / "speed.json")], env=env, cwd=REPO, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert '| twmd | {"centering": "batch"} | this |' in out.stdout
    result = json.loads((tmp_path / "speed.json").read_text())
    (row,) = result["rows"]
    assert row["seconds"] > 0 and row["peak_rss_mb"] > 100
    assert row["x_floor"] == row["seconds"] / result["floor"]["seconds"]
