"""What one skeleton call does, counted statically: the input of the kernel term.

[Pöppl 2014] §6.2.1 counts, per work-item, the operations by type and the memory accesses
by class, then multiplies by the number of work-items. Here the counts come from the typed
muscle's features (``skelpy.muscle.features``) and the skeleton's own access pattern, which
the skeleton fixes: Map/Zip read each input element once, coalesced; a Stencil reads one new
element per cell and re-reads its neighbours' (the *cached* class); AllPairs reads rows
through tiles; Reduce and Scan stream their input. Reads the muscle makes of extra arrays
get the class that :mod:`.access` finds for their index (constant, coalesced, strided or
gathered), gathered when unknown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .terms import MEMORY_CLASSES, OP_CLASSES

# How many kernels a call of each skeleton enqueues (Reduce: groups then their partials;
# Scan: tiles and their carries).
KERNELS = {"map": 1, "zip": 1, "reduce": 2, "mapreduce": 2, "scan": 2, "allpairs": 1,
           "stencil": 1}
# AllPairs stages rows of A and B through tiles: each global element is read by about
# rows/TILE work-groups ([Joshi & Omar 2011] §2.3: the a=0 broadcast per group).
ALLPAIRS_TILE = 16.0


@dataclass(frozen=True)
class Work:
    """What one call does: ``work_items`` launched over ``kernels`` kernels, ``memory``
    units per class (bytes for ``read_byte``/``write_byte``, element accesses otherwise) and
    ``ops`` per class, all totals over the call."""

    work_items: float
    kernels: int
    memory: Mapping[str, float] = field(default_factory=dict)
    ops: Mapping[str, float] = field(default_factory=dict)

    def at_size(self, factor: float) -> Work:
        """The same call on ``factor`` times as many elements (the counts are linear in the
        size; the kernels stay as many)."""
        return Work(self.work_items * factor, self.kernels,
                    {k: v * factor for k, v in self.memory.items()},
                    {k: v * factor for k, v in self.ops.items()})

    def repeated(self, times: int) -> Work:
        """The work of ``times`` calls in a row (a Stencil's iterations)."""
        factor = float(times)
        return Work(self.work_items * factor, self.kernels * times,
                    {k: v * factor for k, v in self.memory.items()},
                    {k: v * factor for k, v in self.ops.items()})


def muscle_ops(features: Mapping[str, float], prefix: str = "",
               loop_trip: float = 1.0) -> dict[str, float]:
    """Operations of one muscle application by class, from its feature counts.

    Static counts are weighted by the loops around them (``instructions_dyn`` over
    ``instructions``); a loop whose trip count is not a constant runs ``loop_trip`` times
    (AllPairs' generic muscles loop over the row length)."""
    def f(key: str) -> float:
        return float(features.get(prefix + key, 0.0))

    static = f("instructions")
    weight = f("instructions_dyn") / static if static > 0 else 1.0
    if f("loops") > 0 and f("loop_trip_static") == 0:
        weight *= max(loop_trip, 1.0)
    alu = f("ops_add") + f("ops_mul") + f("ops_cmp") + f("ops_logic")
    typed = f("ops_int") + f("ops_float")
    share_int = f("ops_int") / typed if typed > 0 else 0.0
    fp64 = min(f("ops_fp64"), alu)
    alu_int = (alu - fp64) * share_int
    return {
        "alu32": weight * (alu - fp64 - alu_int),
        "alu64": weight * fp64,
        "int": weight * alu_int,
        "div": weight * f("ops_div"),
        "math": weight * f("ops_math"),
    }


def _add(into: dict[str, float], more: Mapping[str, float], factor: float) -> None:
    for k, v in more.items():
        into[k] = into.get(k, 0.0) + v * factor


def call_work(skeleton: str, features: Mapping[str, float], dataset: Mapping[str, float], *,
              input_itemsizes: Sequence[int], out_itemsize: int,
              extra_reads: Mapping[str, float] | None = None,
              iterations: int = 1) -> Work:
    """The :class:`Work` of one call.

    ``input_itemsizes``: bytes per element of each container input the skeleton streams
    (index spaces excluded). ``extra_reads``: per muscle application, reads of extra arrays
    by access class (from :mod:`.access`): bytes for ``coalesced``, accesses otherwise."""
    n = float(dataset.get("n", 0.0))
    memory = dict.fromkeys(MEMORY_CLASSES, 0.0)
    ops = dict.fromkeys(OP_CLASSES, 0.0)
    kernels = KERNELS.get(skeleton, 1)
    in_bytes = float(sum(input_itemsizes))
    extra = dict(extra_reads or {})
    if skeleton in ("map", "zip"):
        items = n
        memory["read_byte"] += n * in_bytes
        memory["write_byte"] += n * out_itemsize
        _add(ops, muscle_ops(features), n)
    elif skeleton in ("reduce", "mapreduce"):
        items = n
        memory["read_byte"] += n * in_bytes
        _add(ops, muscle_ops(features), n)
        _add(ops, muscle_ops(features, "map_"), n)
        if dataset.get("axis", -1.0) >= 0:        # one result per row or column
            memory["write_byte"] += out_itemsize * (n / max(dataset.get("cols", 1.0), 1.0))
    elif skeleton == "scan":
        items = n
        memory["read_byte"] += 1.5 * n * in_bytes  # one pass or two, as the method is
        memory["write_byte"] += n * out_itemsize
        _add(ops, muscle_ops(features), 2.0 * n)    # fold, then rescan from the prefix
    elif skeleton == "allpairs":
        rows, cols = float(dataset.get("rows", 0.0)), float(dataset.get("cols", 0.0))
        depth = float(dataset.get("depth", 1.0))
        items = rows * cols
        half = in_bytes / 2 if len(input_itemsizes) >= 2 else in_bytes
        memory["read_byte"] += half * depth * (rows + cols) * max(
            1.0, min(rows, cols) / ALLPAIRS_TILE)
        memory["cached"] += 2.0 * items * depth
        memory["write_byte"] += items * out_itemsize
        if features.get("generic", 0.0):
            _add(ops, muscle_ops(features, loop_trip=depth), items)
        else:
            _add(ops, muscle_ops(features), items * depth)
            _add(ops, muscle_ops(features, "reduce_"), items * depth)
    elif skeleton == "stencil":
        items = n
        reads = float(features.get("reads_dyn", features.get("reads", 1.0)))
        streamed = max(len(input_itemsizes), 1)
        memory["read_byte"] += n * in_bytes
        memory["cached"] += n * max(reads - streamed, 0.0)
        memory["write_byte"] += n * out_itemsize
        _add(ops, muscle_ops(features), n)
        extra = {}                                  # neighbourhood reads are counted above
    else:
        items = n
        memory["read_byte"] += n * in_bytes
        memory["write_byte"] += n * out_itemsize
        _add(ops, muscle_ops(features), n)
    for cls, per_item in extra.items():
        if cls == "coalesced":                      # given in bytes per item
            memory["read_byte"] += per_item * items
        elif cls in memory:
            memory[cls] += per_item * items
    work = Work(items, kernels, memory, ops)
    return work.repeated(iterations) if iterations != 1 else work
