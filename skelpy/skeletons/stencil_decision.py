"""The tuner's decision for a StencilSequence call: staged, fused or streamed, with its tile.

:class:`DecisionPlans` holds a call's fused plan (:mod:`.stencil_fused`) and streamed plan
(:mod:`.stencil_stream`), either None where it does not apply, and the tuner's space over the
three ways (``fuse`` 0, 1, 2): a point of one way holds the other ways' tiles at fixed values,
so every run is one point of the space, and the space walks the ways' own grids
(:class:`_UnionSpace`), not the product of every parameter. :meth:`DecisionPlans.broken`
names the limit a point breaks, for a forced point no legal point keeps.
"""

from __future__ import annotations

import itertools
import math
import weakref

from .. import runtime as _rt
from ..tuner.space import Param, ParamSpace
from . import stencil_fused as _fused

__all__ = ["DecisionPlans"]

# the values of the tiles that do not apply (the fused tile when not fused, ...)
_NO_FUSE = {k: v for k, v in _fused.STAGED.items() if k != "fuse"}
_NO_STREAM = {"tb_wc": 128, "tb_wr": 1, "tb_rows": 128, "tb_vec": 1, "tb_ring": 1,
              "tb_unroll": 1, "tb_pre": 2}


class _UnionSpace(ParamSpace):
    """A space whose legal points lie in a few families (staged; fused with the fused tile;
    streamed with the stream tile), each with its other parameters fixed: the grid walked is
    the families' own grids, not the product of every parameter (over a million points)."""

    def __init__(self, *args, families, **kwargs):
        self._families = families        # (the fixed values, the parameters it varies)
        super().__init__(*args, **kwargs)

    def legal_points(self):
        if self._points is None:
            pts = []
            for fixed, free in self._families:
                for values in itertools.product(*(p.values for p in free)):
                    pt = dict(fixed)
                    pt.update(zip((p.name for p in free), values, strict=True))
                    if self.is_legal(pt):
                        pts.append(pt)
            self._points = pts
            self._index = {self.key(pt): i for i, pt in enumerate(pts)}
        return self._points

    def _complete(self, forced, filled):
        best, best_d = None, math.inf
        for fixed, free in self._families:
            if any(k in forced and forced[k] != v for k, v in fixed.items()
                   if k == "fuse"):
                continue
            open_ = [p for p in free if p.name not in forced]
            for values in itertools.product(*(p.values for p in open_)):
                cand = dict(filled)
                cand.update({k: v for k, v in fixed.items() if k not in forced})
                cand.update(zip((p.name for p in open_), values, strict=True))
                if self.is_legal(cand):
                    d = self.distance(cand, filled)
                    if d < best_d:
                        best, best_d = cand, d
        return best


class DecisionPlans:
    """The fused and the streamed plan of a call (None where one does not apply) and the
    tuner's space over staged (``fuse`` 0), fused (1, with the ``fu_*`` tile) and streamed
    (2, with the ``tb_*`` tile; one pass per run of the sequence). The tile that does not
    apply to a point holds fixed values, so every run is one point of the space."""

    def __init__(self, fused, stream):
        self.fused, self.stream = fused, stream
        self.kernel_key = "+".join(p.kernel_key for p in (fused, stream) if p is not None)
        base = fused if fused is not None else stream
        self.features = dict(base.features, fused=1.0)
        self.in_dtype = fused.in_dtype if fused is not None else stream.levels[0]
        self.out_dtype = fused.out_dtype if fused is not None else stream.out_dtype
        self._spaces: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def staged_point(self) -> dict:
        point = {"fuse": 0}
        if self.fused is not None:
            point.update(_NO_FUSE)
        if self.stream is not None:
            point.update(_NO_STREAM)
        return point

    def stream_tile(self, dev) -> dict | None:
        """The streamed point a GPU starts from (:meth:`StreamPlan.gpu_default`), None where
        it is not legal on ``dev``."""
        if self.stream is None:
            return None
        point = dict(self.staged_point(), fuse=2, **self.stream.gpu_default())
        return point if self._legal(point, dev) else None

    def _legal(self, p, dev) -> bool:
        how = int(p["fuse"])
        no_fuse = self.fused is None or all(p[k] == v for k, v in _NO_FUSE.items())
        no_stream = self.stream is None or all(p[k] == v for k, v in _NO_STREAM.items())
        if how == 0:
            return no_fuse and no_stream
        if how == 1:
            return self.fused is not None and no_stream and self.fused.legal(p, dev)
        if how == 2:
            return self.stream is not None and no_fuse and self.stream.legal(
                dict(p, t=self.stream.n_stages), dev)
        return False

    def broken(self, p, dev) -> tuple[int, str] | None:
        """The first limit point ``p`` breaks on ``dev`` (as ``StreamPlan.broken``)."""
        how = int(p["fuse"])
        fused_set = self.fused is not None and any(p[k] != v for k, v in _NO_FUSE.items())
        stream_set = self.stream is not None and any(p[k] != v for k, v in _NO_STREAM.items())
        if how == 1 and self.fused is not None:
            return (0, "stream tile parameters (tb_*) with fuse=1") if stream_set else \
                self.fused.broken(p, dev)
        if how == 2 and self.stream is not None:
            return (0, "fused tile parameters (fu_*) with fuse=2") if fused_set else \
                self.stream.broken(dict(p, t=self.stream.n_stages), dev)
        if how in (1, 2):
            return 0, f"this sequence cannot run {'fused' if how == 1 else 'streamed'}"
        return (0, "tile parameters with fuse=0 (staged)") if fused_set or stream_set else None

    def default(self, dev) -> dict:
        """The first guess: staged everywhere. On an H200 (2026-11-23, 4096^2, kernel time)
        Canny streamed ran at 0.67x of staged and the separable Canny at 0.47x, the fused
        tile at 0.73x and 1.12x (its best tile); on PoCL streamed 0.30x/0.50x. The tuner's
        measuring modes try the fused and streamed points (:meth:`stream_tile`)."""
        return self.staged_point()

    def space(self, rt: _rt.Runtime) -> ParamSpace:
        """Staged, fused or streamed: the tuner's space on ``rt``'s device (per runtime)."""
        sp = self._spaces.get(rt)
        if sp is not None:
            return sp
        dev = rt.device
        ways = (0,) + ((1,) if self.fused is not None else ()) + \
            ((2,) if self.stream is not None else ())
        params = [Param("fuse", ways, numeric=False,
                        doc="0: staged, 1: one fused kernel, 2: one streaming pass")]
        extra_ok: tuple = ()
        families = [(self.staged_point(), [])]
        if self.fused is not None:
            tile = [p for p in self.fused.space(rt).params if p.name != "fuse"]
            params += tile
            families.append((dict(self.staged_point(), fuse=1), tile))
            extra_ok += ("fu_wc", "fu_wr", "fu_cr", "fu_cc")
        if self.stream is not None:
            tile = [p for p in self.stream.tile_params(rt, (self.stream.n_stages,))
                    if p.name != "t"]
            params += tile
            families.append((dict(self.staged_point(), fuse=2), tile))
            extra_ok += ("tb_wc", "tb_wr", "tb_rows")
        sp = _UnionSpace(params, self.default(dev), lambda p: self._legal(p, dev),
                         extra_values_ok=extra_ok, families=families)
        self._spaces[rt] = sp
        return sp

    def complete(self, forced: dict | None, dev) -> dict | None:
        """A forced decision as a whole point: the tile that does not apply at its fixed
        values; ``{"fuse": 1}`` alone the fused tile a GPU starts from
        (:meth:`FusedPlan.best_tile`), ``{"fuse": 2}`` alone the streamed one."""
        if not forced:
            return None
        how = int(forced.get("fuse", 0))
        point = self.staged_point()
        if how == 1 and self.fused is not None:
            tile = self.fused.best_tile(dev) if not set(forced) - {"fuse"} else None
            point.update(tile or {})
        elif how == 2 and self.stream is not None:
            point.update(self.stream.gpu_default())
        point.update(forced)
        # Where that start is not legal (a stage reaching 8 cells: the GPUs' stream tile
        # overlaps itself; no fused tile within the budget), the space completes what was not
        # forced with the nearest legal values: ``{"fuse": 2}`` alone was refused.
        return point if self._legal(point, dev) else dict(forced)
