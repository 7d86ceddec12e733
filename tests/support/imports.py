"""Reading a module's imports with ast (the layering and import-cycle tests share it)."""

from __future__ import annotations

import ast


def runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import that can run: top level and inside functions, not under `if TYPE_CHECKING:`."""
    out: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                for c in child.orelse:
                    walk(c)
                continue
            if isinstance(child, ast.Import | ast.ImportFrom):
                out.append(child)
            walk(child)

    walk(tree)
    return out
