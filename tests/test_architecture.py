"""The package's structure: layers import downward only, the public namespace is ``__all__``,
and the repository cites no document it does not contain (docs/design.md, "Layers")."""

from __future__ import annotations

import ast
import pathlib
import re

import gpuarrays as ga

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "gpuarrays"

# Layers, lowest first: a module may import its own layer or any layer below it.
LAYERS = ["_common", "backends", "_core", "_dlpack", "_rng", "_memory", "_array", "_compute",
          "linalg", "fft", "random", "interop", "__init__", "cli", "__main__"]


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _resolve(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def _imports(path: pathlib.Path, *, top_level_only: bool):
    """(imported module, line, is_top_level) for every import of a gpuarrays module in ``path``."""
    module = _module_name(path)
    tree = ast.parse(path.read_text(), str(path))
    top = set(map(id, tree.body))
    for node in ast.walk(tree):
        at_top = id(node) in top
        if top_level_only and not at_top:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = _resolve(module, path.name == "__init__.py", node.level, node.module)
            elif node.module and node.module.split(".")[0] == "gpuarrays":
                base = node.module
            else:
                continue
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                yield (candidate if _exists(candidate) else base), node.lineno, at_top
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "gpuarrays":
                    yield alias.name, node.lineno, at_top


def _exists(module: str) -> bool:
    rel = pathlib.Path(*module.split(".")[1:])
    return ((PACKAGE / rel).with_suffix(".py").exists() or (PACKAGE / rel / "__init__.py").exists()
            or any(PACKAGE.glob(f"{rel}.*.so")))


def _sources():
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _sources():
        mod = _module_name(path)
        deps = graph.setdefault(mod, set())
        for target, _, _ in _imports(path, top_level_only=True):
            if target != mod and not mod.startswith(target + "."):  # a package's own parent
                deps.add(target)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return stack[stack.index(dep):] + [dep]
            if dep not in state:
                found = visit(dep)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _layer(module: str) -> int:
    parts = module.split(".")
    name = parts[1] if len(parts) > 1 else "__init__"
    return LAYERS.index(name)


def test_no_module_level_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "module-level import cycle: " + " -> ".join(cycle)


def test_the_cycle_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_every_module_belongs_to_a_layer():
    for path in _sources():
        _layer(_module_name(path))  # ValueError names the module outside the picture


def test_imports_go_down_the_layers():
    """Module-level imports never go up; an import inside a function that does says why."""
    upward = []
    for path in _sources():
        mod = _module_name(path)
        lines = path.read_text().splitlines()
        for target, lineno, at_top in _imports(path, top_level_only=False):
            if _layer(target) <= _layer(mod):
                continue
            if at_top:
                upward.append(f"{mod}:{lineno} imports {target} at module level")
            elif "#" not in lines[lineno - 1] and "#" not in lines[lineno - 2]:
                upward.append(f"{mod}:{lineno} imports {target} upward without a comment")
    assert not upward, "\n".join(upward)


def test_dir_is_exactly_the_public_api():
    public_subpackages = {"interop", "linalg", "fft", "random"}
    listed = set(ga.__all__)
    assert len(listed) == len(ga.__all__), "duplicates in gpuarrays.__all__"
    missing = [n for n in ga.__all__ if not hasattr(ga, n)]
    assert not missing, f"__all__ names missing from the module: {missing}"
    shown = {n for n in dir(ga) if not n.startswith("_")}
    assert shown - public_subpackages == listed - public_subpackages, (
        f"not in __all__: {sorted(shown - listed - public_subpackages)}; "
        f"in __all__ but hidden: {sorted(listed - shown)}")
    assert "annotations" not in dir(ga)


def test_array_is_a_function_that_copies():
    import numpy as np

    a = ga.array([1, 2, 3])
    assert isinstance(a, ga.GPUArray) and a.get().tolist() == [1, 2, 3]
    b = ga.array(a)
    assert b.storage is not a.storage
    c = ga.array(np.arange(4.0), dtype=np.float32)
    assert c.dtype == np.float32


_TEXT = {".py", ".md", ".c", ".h", ".sh", ".toml", ".txt", ".cfg"}
_SKIP = {".git", ".venv", "build", "dist", "__pycache__", ".hypothesis", ".pytest_cache"}


def _repository_files():
    for path in ROOT.rglob("*"):
        if path.is_file() and path.suffix in _TEXT and not _SKIP & set(path.parts):
            yield path


def test_no_reference_to_an_outside_specification():
    spec = re.compile(r"\bSPEC(\.md)?\b(?!IAL)")
    found = [f"{p.relative_to(ROOT)}:{i}" for p in _repository_files() if p != pathlib.Path(__file__)
             for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
             if spec.search(line)]
    assert not found, "references to a document the repository does not contain:\n" + "\n".join(found)


def test_every_referenced_doc_exists():
    ref = re.compile(r"\b(docs/[\w./-]+\.md)\b")
    dangling = []
    for p in _repository_files():
        for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            for target in ref.findall(line):
                if not (ROOT / target).exists():
                    dangling.append(f"{p.relative_to(ROOT)}:{i} -> {target}")
    md_link = re.compile(r"\]\(([\w./-]+\.md)(#[\w-]*)?\)")
    for p in ROOT.glob("**/*.md"):
        if _SKIP & set(p.parts):
            continue
        for i, line in enumerate(p.read_text().splitlines(), 1):
            for target, _ in md_link.findall(line):
                if not (p.parent / target).resolve().exists():
                    dangling.append(f"{p.relative_to(ROOT)}:{i} -> {target}")
    assert not dangling, "\n".join(dangling)
