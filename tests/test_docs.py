"""The documentation cannot rot: every ```python block of docs/*.md and README.md runs,
and docs/api.md covers exactly ``gpuarrays.__all__``."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpuarrays as ga

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.S | re.M)

# Runs the blocks of one file in order, in one namespace, like a reader following along;
# each block is compiled with its file and line so a failure points at the doc.
RUNNER = """
import json, sys
blocks = json.loads(sys.stdin.read())
namespace = {"__name__": "__doc_example__"}
for path, line, source in blocks:
    code = compile("\\n" * (line - 1) + source, path, "exec")
    exec(code, namespace)
print("ran", len(blocks), "blocks")
"""


def python_blocks(path: Path) -> list[tuple[str, int, str]]:
    text = path.read_text(encoding="utf-8")
    return [(str(path), text.count("\n", 0, m.start(1)) + 1, m.group(1))
            for m in FENCE.finditer(text)]


def test_the_docs_exist():
    names = {p.name for p in DOCS}
    assert {"guide.md", "backends.md", "coming-from.md", "performance.md", "decisions.md",
            "api.md", "README.md"} <= names


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_python_blocks_run(path):
    import json

    blocks = python_blocks(path)
    if not blocks:
        return
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH"))
                                        if p)
    proc = subprocess.run([sys.executable, "-W", "error", "-c", RUNNER],
                          input=json.dumps(blocks), capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=300)
    assert proc.returncode == 0, f"an example in {path.name} failed:\n{proc.stderr}"
    assert f"ran {len(blocks)} blocks" in proc.stdout
    assert proc.stderr == "", proc.stderr


def _gen_api():
    spec = importlib.util.spec_from_file_location("gen_api", ROOT / "docs" / "gen_api.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_reference_covers_every_public_name():
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = re.findall(r"^### `ga\.([A-Za-z_][A-Za-z0-9_]*)`$", text, re.M)
    missing = sorted(set(ga.__all__) - set(documented))
    stale = sorted(set(documented) - set(ga.__all__))
    assert not missing, f"api.md lacks {missing}: run python docs/gen_api.py"
    assert not stale, f"api.md documents names no longer public {stale}: run python docs/gen_api.py"
    assert len(documented) == len(set(documented))


def test_api_reference_summaries_match_the_docstrings():
    """Each entry starts with its object's docstring summary (regenerate when they change)."""
    gen = _gen_api()
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    stale = []
    for name in ga.__all__:
        first = gen.summary(getattr(ga, name))
        if first and first not in text:
            stale.append(name)
    assert not stale, f"api.md is out of date for {stale}: run python docs/gen_api.py"


def test_gen_api_renders_every_name():
    rendered = _gen_api().render()
    for name in ga.__all__:
        assert f"### `ga.{name}`" in rendered


def test_api_reference_lists_every_public_subpackage():
    """``ga.linalg``, ``ga.fft``, ``ga.random`` and every module of ``ga.interop`` have a
    section (regression: api.md covered ``ga.__all__`` only)."""
    sections = dict(_gen_api().SUBPACKAGES)
    interop = {f"interop.{p.stem}" for p in (ROOT / "src" / "gpuarrays" / "interop").glob("*.py")
               if not p.stem.startswith("_")}
    public = {sub for sub in ga._PUBLIC_SUBPACKAGES if sub != "interop"}
    assert set(sections) == public | interop, "add it to SUBPACKAGES in docs/gen_api.py"
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for sub, title in sections.items():
        assert f"\n## {title}\n" in text, f"api.md has no section for ga.{sub}"


def _subpackage(sub: str):
    """``gpuarrays.<sub>``, or a skip when the library an interop module wraps is missing."""
    try:
        return _gen_api().subpackage(sub)
    except ImportError as e:
        pytest.skip(f"gpuarrays.{sub} cannot be imported here: {e}")


@pytest.mark.parametrize("sub", ["linalg", "fft", "random", "interop.cupy", "interop.numba",
                                 "interop.pyopencl", "interop.dask"])
def test_api_reference_covers_every_subpackage_name(sub):
    module = _subpackage(sub)
    gen = _gen_api()
    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    documented = re.findall(rf"^### `ga\.{re.escape(sub)}\.([A-Za-z_][A-Za-z0-9_]*)`$", text,
                            re.M)
    assert sorted(documented) == sorted(module.__all__), (
        f"api.md's ga.{sub} section is out of date: run python docs/gen_api.py")
    stale = [name for name in module.__all__
             if (first := gen.summary(getattr(module, name))) and first not in text]
    assert not stale, f"api.md is out of date for ga.{sub}.{stale}: run python docs/gen_api.py"


def test_performance_page_shows_the_command_that_made_it():
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    assert "gpuarrays bench" in text
    assert "Targets" in text
