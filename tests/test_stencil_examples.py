"""The stencil examples run (quick mode), write their pictures and agree with their references."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def test_game_of_life_matches_np_roll(tmp_path, capsys):
    from examples import game_of_life

    res = game_of_life.main(["--quick", "--out", str(tmp_path)])
    assert res["match"] is True
    assert os.path.getsize(res["png"]) > 0
    if res["gif"]:
        assert os.path.getsize(res["gif"]) > 0
    assert "matches the NumPy np.roll implementation: True" in capsys.readouterr().out


def test_canny_agrees_with_skimage(tmp_path, capsys):
    pytest.importorskip("skimage")
    from examples import canny

    res = canny.main(["--quick", "--out", str(tmp_path)])
    assert res["f1"] >= 0.9, res
    assert all(os.path.getsize(p) > 0 for p in res["pngs"])
    assert "F1 agreement" in capsys.readouterr().out


def test_gaussian_blur_matches_scipy(tmp_path):
    pytest.importorskip("skimage")
    from examples import gaussian_blur

    res = gaussian_blur.main(["--quick", "--out", str(tmp_path)])
    assert res["max_err"] < 1e-5
    assert [r["radius"] for r in res["rows"]] == [1, 4, 10]
    assert os.path.getsize(res["png"]) > 0


def test_heat_matches_numpy_loop(tmp_path):
    from examples import heat

    res = heat.main(["--quick", "--out", str(tmp_path)])
    assert res["max_err"] < 1e-3
    assert res["drift"] < 1e-5
    assert os.path.getsize(res["png"]) > 0
