"""The size of the code's units: the longest functions and classes, and the files per package.

    python tools/code_shape.py [--root src/autospec] [--max-function 80] [--max-class 300] [--top 5]

Prints the longest functions and classes (lines from the ``def``/``class`` line to the
last line of the body, decorators and docstrings included) and the number of modules in
each package; exits 1, naming each offender, when a function or class is longer than
its bound. `.ci/run` runs it, so the bounds hold as the code grows.
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter
from pathlib import Path


def units(root: Path) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(functions, classes) under `root`, each as (lines, "path:line name")."""
    functions: list[tuple[int, str]] = []
    classes: list[tuple[int, str]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                size = (node.end_lineno or node.lineno) - first + 1
                where = f"{path.relative_to(root.parent)}:{node.lineno} {node.name}"
                (classes if isinstance(node, ast.ClassDef) else functions).append((size, where))
    return sorted(functions, reverse=True), sorted(classes, reverse=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1] / "src" / "autospec")
    ap.add_argument("--max-function", type=int, default=80)
    ap.add_argument("--max-class", type=int, default=300)
    ap.add_argument("--top", type=int, default=5)
    args = ap.parse_args(argv)
    functions, classes = units(args.root)
    for title, found in (("functions", functions), ("classes", classes)):
        print(f"longest {title}: " + "; ".join(f"{size} lines {where}" for size, where in found[: args.top]))
    packages = Counter(str(p.parent.relative_to(args.root.parent)) for p in args.root.rglob("*.py"))
    print("modules per package: " + ", ".join(f"{name} {count}" for name, count in sorted(packages.items())))
    over = [f"function {w} has {s} lines (at most {args.max_function})" for s, w in functions if s > args.max_function]
    over += [f"class {w} has {s} lines (at most {args.max_class})" for s, w in classes if s > args.max_class]
    for line in over:
        print(f"code_shape: {line}; split it", file=sys.stderr)
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
