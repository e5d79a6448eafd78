"""Static operation counts of a translated muscle, the autotuner's view of its cost.

Counts are static (each operation in the source once) except the ``*_dyn`` entries, which weight
each operation by the product of the static trip counts of the ``range()`` loops around it (a loop
whose trip count is not a constant weighs 1).
"""

from __future__ import annotations

FEATURE_KEYS = (
    "ops_add", "ops_mul", "ops_div", "ops_cmp", "ops_logic", "ops_math", "ops_int", "ops_float",
    "ops_fp64", "branches", "loops", "reads", "calls", "instructions", "loop_trip_static",
    "reads_dyn", "instructions_dyn",
)

_OP_KEYS = ("ops_add", "ops_mul", "ops_div", "ops_cmp", "ops_logic", "ops_math", "reads",
            "branches")


class FeatureCounter:
    """Accumulates counts while the final C code is generated."""

    def __init__(self) -> None:
        self.c: dict[str, float] = {k: 0.0 for k in FEATURE_KEYS}
        self.c["loop_trip_static"] = 1.0
        self._weights: list[float] = [1.0]

    @property
    def weight(self) -> float:
        return self._weights[-1]

    def op(self, key: str, kind: str | None = None, fp64: bool = False, n: float = 1.0) -> None:
        """Count one operation of category ``key``; ``kind`` 'i'/'f' feeds ops_int/ops_float."""
        self.c[key] += n
        if kind == "f":
            self.c["ops_float"] += n
        elif kind in ("i", "u", "b"):
            self.c["ops_int"] += n
        if fp64:
            self.c["ops_fp64"] += n
        self.c["instructions"] += n
        self.c["instructions_dyn"] += n * self.weight
        if key == "reads":
            self.c["reads_dyn"] += n * self.weight

    def enter_loop(self, trip: int | None) -> None:
        self.c["loops"] += 1
        if trip is None:
            self.c["loop_trip_static"] = 0.0
        elif self.c["loop_trip_static"]:
            self.c["loop_trip_static"] *= max(trip, 0)
        self._weights.append(self.weight * (max(trip, 0) if trip is not None else 1.0))

    def exit_loop(self) -> None:
        self._weights.pop()

    def add(self, other: dict[str, float]) -> None:
        """Add the counts of a called helper (its body runs once per call site)."""
        w = self.weight
        for k, v in other.items():
            if k == "loop_trip_static":
                if not v:
                    self.c[k] = 0.0
                elif self.c[k]:
                    self.c[k] *= v
            elif k.endswith("_dyn"):
                self.c[k] += v * w
            elif k in self.c:
                self.c[k] += v
        self.c["calls"] += 1

    def result(self) -> dict[str, float]:
        return dict(self.c)
