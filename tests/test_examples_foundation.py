"""The foundation's examples run and produce what they promise."""

from __future__ import annotations

import re

import numpy as np

from examples import mandelbrot


def test_mandelbrot_writes_png(tmp_path):
    out = tmp_path / "m.png"
    counts = mandelbrot.main(["--size", "96x64", "--iterations", "60", "--out", str(out)])
    assert out.exists() and out.stat().st_size > 1000
    with open(out, "rb") as fh:
        assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    # Independent reference: the same iteration in NumPy (vectorised, float32).
    rows, cols = counts.shape
    c = (np.float32(mandelbrot.X0) + np.arange(cols, dtype=np.float32)
         * np.float32((mandelbrot.X1 - mandelbrot.X0) / cols))[None, :]
    r = (np.float32(mandelbrot.Y0) + np.arange(rows, dtype=np.float32)
         * np.float32((mandelbrot.Y1 - mandelbrot.Y0) / rows))[:, None]
    x = np.zeros((rows, cols), np.float32)
    y = np.zeros((rows, cols), np.float32)
    n = np.zeros((rows, cols), np.int64)
    for _ in range(60):
        active = (x * x + y * y <= 4)
        x, y = (np.where(active, x * x - y * y + c, x), np.where(active, 2 * x * y + r, y))
        n += active
    assert np.mean(counts == n) > 0.98


def test_demo_runs_and_reports_correct_results(capsys):
    from examples import demo

    demo.main()
    out = capsys.readouterr().out
    assert "device:" in out
    # the demo's own check against NumPy: 2 x^2 + 1 in float32 (within an ulp or two)
    err = float(re.search(r"max error (\S+)", out).group(1))
    assert err <= 4 * np.finfo(np.float32).eps
    idx = re.search(r"i\*i % 7: \[([^\]]*)\]", out).group(1)
    assert [int(v) for v in idx.split()] == [i * i % 7 for i in range(10)]
    sq = re.search(r"sqrt on \[0, 1, 4, 9\]: \[([^\]]*)\]", out).group(1)
    assert [float(v) for v in sq.split()] == [0.0, 1.0, 2.0, 3.0]
