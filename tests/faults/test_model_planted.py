"""A model planted by another user is never loaded, let alone executed: not from a cache
folder they own, not from a models folder others can write, not as a file they own. The
planted files are pickles that would create a marker file if unpickled, and valid model
archives with a tell-tale measurement count."""

from __future__ import annotations

import os
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from test_tuner_support import DEFAULT_SPACE_SWEEP, cache_dir  # noqa: F401

from skelpy import tuner
from skelpy.tuner import model_files
from skelpy.tuner import store as tstore

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="chown to another uid needs root")
TELLTALE = 424242
FAKE_DEV = "FakeCL | Fake Device | 1.0"


class _Payload:
    """Unpickling this creates the marker file: proof that code from the cache ran."""

    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return (Path.touch, (self.marker,))


def _plant(directory: Path, device: str, marker: Path, *, owner: int | None = None) -> Path:
    """The attacker's files for ``device``: a pickle under the old name and under the new
    one, and a valid archive of a model that announces itself by its measurement count."""
    models = directory / "models"
    models.mkdir(parents=True, exist_ok=True)
    npz = model_files.model_path(directory, device)
    bomb = pickle.dumps(_Payload(marker))
    npz.with_suffix(".pkl").write_bytes(bomb)
    good = tuner.manager().retrain(FAKE_DEV) if device == FAKE_DEV else None
    planted = model_files.DeviceModel(device, TELLTALE, dict(good.groups) if good else {})
    npz.write_bytes(model_files.to_bytes(planted))
    (models / "other.npz").write_bytes(bomb)
    if owner is not None:
        for p in (directory, models, *models.iterdir()):
            os.chown(p, owner, owner)
    return npz


def _first_plain_call():
    """A real skeleton's first call in model mode (the probe's trigger)."""
    import skelpy as sk

    x = np.arange(4099, dtype=np.float32)
    f = sk.Map(lambda v: v * 3 - 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        np.testing.assert_array_equal(f(x).to_numpy(), x * 3 - 1)


@needs_root
def test_a_cache_folder_of_another_user_is_not_read(cache_dir, tmp_path):  # noqa: F811
    from skelpy import runtime

    marker = tmp_path / "EXECUTED"
    dev = runtime.current_device().key
    _plant(cache_dir, dev, marker, owner=65534)
    tuner.reset()
    tstore.reset_store()
    _first_plain_call()
    m = tuner.manager().get(dev)
    assert not marker.exists()
    assert m is None or m.n_measurements != TELLTALE
    assert tstore.get_store().degraded                # the folder is not used at all


@pytest.mark.parametrize("mode", [0o775, 0o757])
def test_a_models_folder_others_can_write_is_not_read(cache_dir, tmp_path, mode):  # noqa: F811
    marker = tmp_path / "EXECUTED"
    DEFAULT_SPACE_SWEEP("kern-a")
    DEFAULT_SPACE_SWEEP("kern-b")
    npz = _plant(cache_dir, FAKE_DEV, marker)
    os.chmod(npz.parent, mode)
    tuner.reset()
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        m = tuner.manager().get(FAKE_DEV)
    assert m is None or m.n_measurements != TELLTALE
    assert not marker.exists()
    os.chmod(npz.parent, 0o700)                      # the same file in a private folder loads
    model_files._warned.clear()
    assert model_files.load(npz).n_measurements == TELLTALE


def test_a_world_writable_model_file_is_not_read(cache_dir, tmp_path):  # noqa: F811
    DEFAULT_SPACE_SWEEP("kern-a")
    DEFAULT_SPACE_SWEEP("kern-b")
    npz = _plant(cache_dir, FAKE_DEV, tmp_path / "EXECUTED")
    os.chmod(npz, 0o666)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        assert model_files.load(npz) is None


@needs_root
def test_a_model_file_of_another_user_is_not_read(cache_dir, tmp_path):  # noqa: F811
    DEFAULT_SPACE_SWEEP("kern-a")
    DEFAULT_SPACE_SWEEP("kern-b")
    npz = _plant(cache_dir, FAKE_DEV, tmp_path / "EXECUTED")
    os.chown(npz, 65534, 65534)
    tuner.reset()
    with pytest.warns(RuntimeWarning, match="uid 65534"):
        m = tuner.manager().get(FAKE_DEV)
    assert m is None or m.n_measurements != TELLTALE


def test_a_pickle_in_the_model_place_is_never_unpickled(cache_dir, tmp_path):  # noqa: F811
    marker = tmp_path / "EXECUTED"
    DEFAULT_SPACE_SWEEP("kern-a")
    npz = model_files.model_path(cache_dir, FAKE_DEV)
    npz.parent.mkdir(mode=0o700, exist_ok=True)
    bomb = pickle.dumps(_Payload(marker))
    npz.write_bytes(bomb)                               # our own folder, our own file
    os.chmod(npz, 0o600)
    tuner.reset()
    with pytest.warns(RuntimeWarning, match="ignoring the tuning model"):
        tuner.manager().get(FAKE_DEV)
    assert not marker.exists()
    # and the payload does work when unpickled: the test would see it
    pickle.loads(bomb)
    assert marker.exists()


def test_the_shipped_model_loads_through_the_same_checks(monkeypatch, tmp_path):
    pocl = "Portable Computing Language | pthread-haswell-Some CPU | 6.0"
    shipped = model_files.load_pretrained(pocl)
    assert shipped is not None and shipped.groups             # data-only, and it loads
    assert all(g.origin == "shipped" for g in shipped.groups.values())
    copy = tmp_path / "pretrained"
    copy.mkdir()
    (copy / model_files.SHIPPED_MODEL).write_bytes(
        (model_files.PRETRAINED_DIR / model_files.SHIPPED_MODEL).read_bytes())
    os.chmod(copy, 0o777)
    monkeypatch.setattr(model_files, "PRETRAINED_DIR", copy)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        assert model_files.load_pretrained(pocl) is None
