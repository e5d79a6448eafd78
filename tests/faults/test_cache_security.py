"""The cache folder is private whatever the umask, and skelpy never follows a symlink out of
it nor uses a folder another user controls."""

from __future__ import annotations

import os
import stat
import warnings

import numpy as np
import pytest
from test_tuner_support import DEFAULT_SPACE_SWEEP, cache_dir  # noqa: F401

from skelpy import tuner
from skelpy.tuner import model_files
from skelpy.tuner import store as tstore

needs_root = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                                reason="chown to another uid needs root")


def _mode(path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_umask_000_still_gives_a_private_folder_and_files(cache_dir):  # noqa: F811
    old = os.umask(0)
    try:
        DEFAULT_SPACE_SWEEP("kern-a")
        DEFAULT_SPACE_SWEEP("kern-b")
        tuner.manager().retrain("FakeCL | Fake Device | 1.0")
    finally:
        os.umask(old)
    assert _mode(cache_dir) == 0o700
    db = cache_dir / tstore.DB_NAME
    files = [db] + [p for p in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
                    if p.exists()]
    assert {_mode(p) for p in files} == {0o600}
    models = cache_dir / "models"
    assert _mode(models) == 0o700
    [model] = list(models.iterdir())
    assert _mode(model) == 0o600 and model.suffix == ".npz"


def test_a_symlinked_store_is_not_followed(cache_dir, tmp_path):  # noqa: F811
    cache_dir.mkdir(mode=0o700)
    target = tmp_path / "elsewhere" / "victim.sqlite"
    target.parent.mkdir()
    (cache_dir / tstore.DB_NAME).symlink_to(target)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DEFAULT_SPACE_SWEEP("kern-a")
    assert not target.exists()                         # nothing created at the link's target
    store = tstore.get_store()
    assert store.degraded and "symbolic link" in store.reason
    assert len([w for w in caught if "tuning store" in str(w.message)]) == 1
    assert store.count_measurements() > 10            # tuning went on, in memory


def test_a_symlinked_wal_file_is_not_followed(cache_dir, tmp_path):  # noqa: F811
    cache_dir.mkdir(mode=0o700)
    target = tmp_path / "victim-wal"
    (cache_dir / (tstore.DB_NAME + "-wal")).symlink_to(target)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DEFAULT_SPACE_SWEEP("kern-a")
    assert not target.exists() and tstore.get_store().degraded


@pytest.mark.parametrize("mode", [0o770, 0o777, 0o707])
def test_a_folder_others_can_write_is_not_used(cache_dir, mode):  # noqa: F811
    cache_dir.mkdir()
    os.chmod(cache_dir, mode)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        DEFAULT_SPACE_SWEEP("kern-a")
    store = tstore.get_store()
    assert store.degraded and "writable by other users" in store.reason
    assert not (cache_dir / tstore.DB_NAME).exists()
    assert any("chmod 700" in str(w.message) for w in caught)


@needs_root
def test_a_folder_of_another_user_is_not_used(cache_dir):  # noqa: F811
    cache_dir.mkdir(mode=0o700)
    os.chown(cache_dir, 65534, 65534)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        DEFAULT_SPACE_SWEEP("kern-a")
    store = tstore.get_store()
    assert store.degraded and "uid 65534" in store.reason
    assert list(cache_dir.iterdir()) == []


def test_a_model_file_in_a_symlinked_path_is_not_loaded(cache_dir, tmp_path):  # noqa: F811
    DEFAULT_SPACE_SWEEP("kern-a")
    DEFAULT_SPACE_SWEEP("kern-b")
    dev = "FakeCL | Fake Device | 1.0"
    m = tuner.manager().retrain(dev)
    path = model_files.model_path(cache_dir, dev)
    real = tmp_path / "real.npz"
    real.write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(real)
    with pytest.warns(RuntimeWarning, match="symbolic link"):
        assert model_files.load(path) is None
    assert m.groups and np.isfinite(m.n_measurements)
