"""Parameter spaces: legality filtering, forced parameters, nearest-neighbour fallback."""

from __future__ import annotations

import json

import pytest
from test_tuner_support import make_space

from skelpy.errors import ParameterError
from skelpy.tuner import Param, ParamSpace, pow2_range


def test_pow2_range():
    assert pow2_range(1, 16) == (1, 2, 4, 8, 16)
    assert pow2_range(3, 40) == (4, 8, 16, 32)
    assert pow2_range(64, 32) == ()


def test_legality_filtering_keeps_only_legal_points():
    sp = make_space(max_wg=64)
    pts = sp.points()
    assert pts, "a space with legal points"
    assert all(p["wg"] <= 64 and p["wg"] * p["coarsen"] <= 1024 for p in pts)
    # every legal grid point is there: 7 work-group sizes x 4 factors x 2 strides
    assert len(pts) == 7 * 4 * 2
    assert {"wg": 128, "coarsen": 1, "blocked": 0} not in pts
    assert sp.index({"wg": 128, "coarsen": 1, "blocked": 0}) is None
    assert sp.index(pts[5]) == 5


def test_constraint_errors_count_as_illegal():
    sp = ParamSpace([Param("a", (0, 1, 2))], {"a": 1}, constraint=lambda p: 4 // p["a"] > 0)
    assert [p["a"] for p in sp.points()] == [1, 2]


def test_points_are_copies():
    sp = make_space()
    sp.points()[0]["wg"] = 999
    assert sp.points()[0]["wg"] != 999


def test_normalise_fills_defaults_and_rejects_bad_values():
    sp = make_space(max_wg=128)
    assert sp.normalise({"wg": 32}) == {"wg": 32, "coarsen": 1, "blocked": 0}
    with pytest.raises(ParameterError, match="unknown launch parameter"):
        sp.normalise({"wgs": 32})
    with pytest.raises(ParameterError, match="not one of"):
        sp.normalise({"coarsen": 3})
    with pytest.raises(ParameterError, match="not legal"):
        sp.normalise({"wg": 256})
    with pytest.raises(ParameterError, match="must be a number"):
        ParamSpace([Param("wg", (1, 2))], {"wg": 1}, extra_values_ok=("wg",)).normalise(
            {"wg": "big"})


def test_nearest_is_log_scaled_and_skips_excluded():
    sp = make_space(max_wg=256)
    # 1024 is illegal here; the nearest legal size on a log scale is 256
    assert sp.nearest({"wg": 1024, "coarsen": 1, "blocked": 0}) == \
        {"wg": 256, "coarsen": 1, "blocked": 0}
    p = {"wg": 64, "coarsen": 2, "blocked": 0}
    assert sp.nearest(p) == p
    got = sp.nearest(p, exclude={sp.key(p)})
    assert sp.distance(p, got) == 1.0
    everything = {sp.key(q) for q in sp.points()}
    assert sp.nearest(p, exclude=everything) is None


def test_neighbours_are_one_step_away_nearest_first():
    sp = make_space(max_wg=256)
    p = {"wg": 64, "coarsen": 2, "blocked": 0}
    nb = sp.neighbours(p)
    assert p not in nb
    assert {"wg": 32, "coarsen": 2, "blocked": 0} in nb
    assert {"wg": 64, "coarsen": 2, "blocked": 1} in nb
    assert all(sp.distance(p, q) <= 1.0 for q in nb)
    assert len(nb) == 5


def test_describe_is_json():
    sp = make_space()
    d = json.loads(json.dumps(sp.describe()))
    assert d["default"] == {"wg": 64, "coarsen": 1, "blocked": 0}
    assert [p["name"] for p in d["params"]] == ["wg", "coarsen", "blocked"]
    assert d["legal"] == len(sp.points())
