"""Which kernel shapes an OpenCL device's compiler really handles, probed in a child process.

A device compiler can die inside LLVM on a kernel it accepted to build: PoCL 3.0 (pip's
``pocl-binary-distribution``, LLVM 14) aborts the whole process on ``fma`` of 16-wide
``float`` or 8-wide ``double`` vectors, and silently zeroes ``convert_uint8(ulong8)``.  No
OpenCL error code comes back from an ``abort()``, so the only safe way to learn this is to
try in another process (docs/kernels.md, "Qualification").

**Shapes.**  A generator that can emit a kernel shape some compiler may not handle (a vector
width, local tiles and barriers, a vector random-number kernel) registers it here with
:func:`register`: a name, one line of what it is, the kernel source(s) it compiles (part of
the verdict's key, so a changed generator is probed again) and a *representative*: a function
that runs the generator's own kernel of that shape on a device and raises when the result is
wrong.  Generators then ask :func:`allows` and emit only qualified shapes; the scalar
kernels every generator falls back to need no verdict (a device whose compiler cannot build a
trivial kernel is left out when the back-end loads).

**Probing.**  :func:`verdict` runs :func:`_child` (``INDEX NAMES...``) in a new Python with a private, fresh ``POCL_CACHE_DIR`` (a compiler that dies there cannot
poison the user's cache).  The child says ``start NAME`` before each representative and ``ok
NAME`` or ``no NAME why`` after it; a child that dies during one marks that shape "no"
(with its exit status and the compiler's last words) and a new child probes the rest.  A
representative that hangs past ``_TIMEOUT`` seconds is a "no" too.  Nothing a child does
can end the user's process.

**The verdict on disk.**  One JSON file per device and shape list in :func:`location`,
keyed by the platform's version, the device's name, the driver's version and the hash of
the shape list with its sources.  A file that cannot be parsed, or whose key differs (a
foreign or damaged entry), is a miss; writes are atomic (a temporary file moved into place).
``GPUARRAYS_REQUALIFY=1`` probes again and rewrites the entry; :func:`requalify` does the
same from Python; deleting the folder forgets every verdict.  A folder that cannot be
written only costs the probe in the next process.

Only OpenCL devices are probed: NVRTC reports errors as errors, and the cpu engine
compiles nothing at run time.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["register", "run_probe", "allows", "verdict", "requalify", "location", "Verdict", "SHAPES"]

_CHILD_FLAG = "GPUARRAYS_QUALIFY_CHILD"  # set in the probing child: every shape is allowed
_FAULT = "GPUARRAYS_QUALIFY_FAULT"  # tests: "NAME" makes the child abort() in that shape
_TIMEOUT = 300.0  # seconds one child may take over the shapes it still has to probe
_FORMAT = 1
_CHILD_MAIN = ("import sys; from gpuarrays._compute.device.qualify import _child; "
               "sys.exit(_child(sys.argv[1:]))")


@dataclass(frozen=True)
class Shape:
    """A kernel shape a generator may emit: ``sources()`` gives the kernel text compiled for
    it (for the verdict's key), ``probe(device)`` runs the representative and raises on a
    wrong result."""

    name: str
    what: str
    sources: Callable[[], str]
    probe: Callable[[object], None]


SHAPES: dict[str, Shape] = {}

# The generators that register shapes, imported before a verdict is keyed or probed so the
# shape list never depends on what a process happened to import.
_GENERATORS = ("gpuarrays._compute.device.matmul", "gpuarrays._compute.rng.kernels")


def _registered() -> dict[str, Shape]:
    for module in _GENERATORS:
        importlib.import_module(module)
    return SHAPES


def register(name: str, what: str, sources: Callable[[], str],
             probe: Callable[[object], None]) -> None:
    """Declare a shape (at import of the generator that emits it)."""
    SHAPES[name] = Shape(name, what, sources, probe)


def run_probe(device, source: str, inputs: list, outputs: list[tuple[int, object]],
              items: int, local: int = 1) -> list:
    """A representative's launch: kernel ``probe`` of ``source`` over the NumPy ``inputs``
    (uploaded) and new ``(length, dtype)`` outputs, one pointer argument each, on ``items``
    work-items; the outputs come back as NumPy arrays."""
    from ..._array.creation import asarray, to_numpy
    from ..._array.make import new_array

    args = [asarray(x, device=device) for x in inputs]
    args += [new_array((n,), np.dtype(dtype), device, "device") for n, dtype in outputs]
    kernel = device.impl.compile_kernel(device.index, source, "probe", ("ptr",) * len(args))
    kernel.launch([a._raw().ptr for a in args], items, local)
    return [to_numpy(a) for a in args[len(inputs):]]


@dataclass
class Verdict:
    """What the probe found for one device: ``shapes`` maps each name to ``""`` (works) or
    why not; ``path`` is the file it is kept in, ``probed`` whether this process ran it."""

    shapes: dict[str, str]
    path: Path | None
    probed: bool = False
    seconds: float = 0.0

    def allows(self, name: str) -> bool:
        return self.shapes.get(name, "not probed") == ""


_verdicts: dict[tuple[int, int], Verdict] = {}
_lock = threading.Lock()  # one probe per device and process; other threads wait for it
_ALL_ALLOWED = Verdict({}, None)


def location() -> Path:
    """The folder of the verdicts: ``$GPUARRAYS_QUALIFY_CACHE`` if set, else
    ``$XDG_CACHE_HOME/gpuarrays/qualify`` (``~/.cache/gpuarrays/qualify``)."""
    explicit = os.environ.get("GPUARRAYS_QUALIFY_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gpuarrays" / "qualify"


def allows(device, name: str) -> bool:
    """Whether the generators may emit shape ``name`` on ``device`` (probing on first use)."""
    if device.backend != "opencl" or os.environ.get(_CHILD_FLAG) == "1":
        return True
    return verdict(device).allows(name)


def verdict(device) -> Verdict:
    """The device's verdict: from this process, else from disk, else probed now."""
    if device.backend != "opencl":
        return _ALL_ALLOWED
    key = (id(device.impl), device.index)
    found = _verdicts.get(key)
    if found is not None:
        return found
    with _lock:
        found = _verdicts.get(key)
        if found is None:
            found = _verdicts[key] = _load_or_probe(device, os.environ.get("GPUARRAYS_REQUALIFY")
                                                    == "1")
    return found


def requalify(device) -> Verdict:
    """Probe ``device`` again now and rewrite its entry on disk."""
    with _lock:
        found = _verdicts[(id(device.impl), device.index)] = _load_or_probe(device, True)
    return found


def forget() -> None:
    """Drop this process's verdicts (the next :func:`verdict` reads the disk again)."""
    with _lock:
        _verdicts.clear()


def _facts(device) -> dict[str, str]:
    """The key's facts of an OpenCL device, read through the back-end's PyOpenCL view."""
    context, _ = device.impl.context_and_queue(device.index)
    dev = context.devices[0]
    shapes = hashlib.sha256()
    for name in sorted(_registered()):
        shapes.update(name.encode() + b"\0" + SHAPES[name].sources().encode() + b"\0")
    return {"format": str(_FORMAT), "platform": dev.platform.version.strip(),
            "device": dev.name.strip(), "driver": dev.driver_version.strip(),
            "shapes": shapes.hexdigest()}


def _path(facts: dict[str, str]) -> Path:
    text = json.dumps(facts, sort_keys=True).encode()
    return location() / (hashlib.sha256(text).hexdigest()[:32] + ".json")


def _read(path: Path, facts: dict[str, str]) -> dict[str, str] | None:
    """The shapes of a whole, matching entry, else None (absent, damaged or foreign)."""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(entry, dict) or entry.get("key") != facts:
        return None
    shapes = entry.get("shapes")
    if not isinstance(shapes, dict) or set(shapes) != set(SHAPES) or not all(
            isinstance(v, str) for v in shapes.values()):
        return None
    return shapes


def _write(path: Path, facts: dict[str, str], shapes: dict[str, str]) -> None:
    """Atomically; a folder that cannot be written only costs a probe in the next process."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"key": facts, "shapes": shapes}, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except OSError:
        pass


def _load_or_probe(device, again: bool) -> Verdict:
    facts = _facts(device)
    path = _path(facts)
    shapes = None if again else _read(path, facts)
    if shapes is not None:
        return Verdict(shapes, path)
    start = time.perf_counter()
    shapes = probe(device.index, sorted(_registered()))
    _write(path, facts, shapes)
    return Verdict(shapes, path, probed=True, seconds=time.perf_counter() - start)


def probe(index: int, names: list[str]) -> dict[str, str]:
    """Run the representatives of ``names`` on OpenCL device ``index`` in child processes;
    name -> ``""`` (works) or why not."""
    found: dict[str, str] = {}
    left = list(names)
    with tempfile.TemporaryDirectory(prefix="gpuarrays-qualify-") as runtime_cache:
        env = dict(os.environ, **{_CHILD_FLAG: "1", "POCL_CACHE_DIR": runtime_cache,
                                  "GPUARRAYS_DEVICE": f"opencl:{index}"})
        while left:
            cmd = [sys.executable, "-c", _CHILD_MAIN, str(index), *left]
            try:
                done = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                      timeout=_TIMEOUT, check=False)
                out, err, code = done.stdout, done.stderr, done.returncode
            except subprocess.TimeoutExpired as e:
                out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (
                    e.stdout or "")
                err, code = f"timed out after {_TIMEOUT:.0f} s", None
            current = None
            for line in out.splitlines():
                word, _, rest = line.partition(" ")
                name, _, why = rest.partition(" ")
                if word == "start":
                    current = name
                elif word in ("ok", "no") and name in left:
                    found[name] = "" if word == "ok" else why or "wrong result"
                    left.remove(name)
                    current = None
            if not left:
                break
            victim = current if current in left else left[0]
            found[victim] = _death(code, err)
            left.remove(victim)
    return found


def _death(code: int | None, err: str) -> str:
    """Why a child ended during a representative, in one line."""
    if code is None:
        status = err
    elif code < 0:
        status = f"the probe process was killed by signal {-code}"
    else:
        status = f"the probe process exited with status {code}"
    last = [line.strip() for line in err.splitlines() if line.strip()]
    words = next((line for line in last if "error" in line.lower()), last[-1] if last else "")
    return f"{status}: {words}"[:300] if words and code is not None else status


def _child(argv: list[str]) -> int:
    """The probing child: ``INDEX NAMES...``; one line per shape on stdout."""
    import gpuarrays as ga  # a child process: the whole package, as the user's has it

    device = ga.get_device(f"opencl:{int(argv[0])}")
    _registered()
    fault = os.environ.get(_FAULT, "")
    for name in argv[1:]:
        print("start", name, flush=True)
        if name == fault:
            os.abort()
        try:
            SHAPES[name].probe(device)
        except Exception as e:  # noqa: BLE001 -- any failure of the representative is a "no"
            why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
            print("no", name, why, flush=True)
        else:
            print("ok", name, flush=True)
    return 0

