"""Find import cycles among the modules of a package.

    python scripts/check_import_cycles.py [PACKAGE_DIR ...]   (default: skelpy/muscle)

Reads every ``import`` of every module under the given folders (function-level imports
included: they are cycles put off until a call; imports under ``if TYPE_CHECKING:`` excluded:
they never run), keeps those between modules of the same folders, and prints each cycle
(strongly connected component). Exit status 1 when there is one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def module_name(path: Path, base: Path) -> str:
    parts = list(path.relative_to(base).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top(folder: Path) -> Path:
    """The folder module names start from: above the outermost package holding ``folder``."""
    while (folder / "__init__.py").exists():
        folder = folder.parent
    return folder


def _runtime_nodes(tree: ast.AST):
    """Every node, skipping the bodies of ``if TYPE_CHECKING:``."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[: len(up) - (node.level - 1)]
                base = ".".join(up + ([base] if base else []))
            # ``from pkg import mod`` needs the submodule, not pkg's __init__ (which, as a
            # parent package, is always imported first anyway)
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                       for a in node.names]
        else:
            continue
        for t in targets:
            if t in known and t != name:
                out.add(t)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def main(argv: list[str]) -> int:
    folders = [(ROOT / a).resolve() for a in argv] or [ROOT / "skelpy" / "muscle"]
    names = {module_name(p, _top(f)): p for f in folders for p in sorted(f.rglob("*.py"))}
    graph = {n: imports_of(p, n, set(names)) for n, p in names.items()}
    found = cycles(graph)
    for comp in found:
        print("import cycle: " + " <-> ".join(comp))
    print(f"{len(names)} modules, {sum(len(v) for v in graph.values())} imports among them, "
          f"{len(found)} cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
