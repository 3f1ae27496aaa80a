"""Re-run the benchmarks and paste their reports into docs/performance.md.

``python benchmarks/update_docs.py`` runs, as subprocesses, exactly the commands listed in
``COMMANDS`` (the OpenCL one only when PyOpenCL finds a device) and replaces the text between
the ``<!-- bench:start -->`` and ``<!-- bench:end -->`` markers of docs/performance.md with each
command line and its output. The prose around the markers is written by hand.
"""

from __future__ import annotations

import datetime
import os
import platform
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "performance.md")
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
ISSUE_32 = "elementwise,creation,programs"  # where real programs spend their time
COMMANDS = (["gpuarrays", "bench", "--device", "cpu:0"],
            ["gpuarrays", "bench", "--device", "opencl:0", "--quick"],
            ["gpuarrays", "bench", "--only", f"{ISSUE_32},pool-trace", "--device", "cpu:0"],
            ["gpuarrays", "bench", "--only", f"{ISSUE_32},compute", "--device", "opencl:0"],
            ["PIP_POCL", "gpuarrays", "bench", "--only", "creation,programs", "--device",
             "opencl:0"])
"""The commands whose reports are pasted, in order.  ``PIP_POCL`` first: the same with only
the PoCL that ``pip install "gpuarrays[opencl]"`` brings (``OCL_ICD_VENDORS`` naming the ICD
folder of pyopencl's wheel, a fresh ``POCL_CACHE_DIR``), the runtime users get; left out
where that folder holds no ICD file."""
PIP_POCL_SHELL = ('OCL_ICD_VENDORS=$(python -c "import pyopencl,os;'
                  'print(os.path.dirname(pyopencl.__file__)+\'/.libs\')")')


def _available(spec: str) -> bool:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    import gpuarrays as ga

    return spec in {str(d) for d in ga.devices()}


def _pip_pocl_env(env: dict) -> dict | None:
    """``env`` with only pip's PoCL visible, or None where pyopencl's wheel ships no ICD."""
    try:
        import pyopencl
    except ImportError:
        return None
    icds = os.path.join(os.path.dirname(pyopencl.__file__), ".libs")
    if not os.path.isdir(icds) or not any(f.endswith(".icd") for f in os.listdir(icds)):
        return None
    return {**env, "OCL_ICD_VENDORS": icds, "POCL_CACHE_DIR": tempfile.mkdtemp()}


def main() -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "src"),
                                                    env.get("PYTHONPATH")) if p)
    parts = [START, "",
             f"Measured {datetime.date.today().isoformat()} on {platform.machine()}, "
             f"{os.cpu_count()} CPU cores, Python {platform.python_version()}.", ""]
    for cmd in COMMANDS:
        run_env, shown = env, cmd
        if cmd[0] == "PIP_POCL":
            run_env, cmd = _pip_pocl_env(env), cmd[1:]
            shown = [PIP_POCL_SHELL, *cmd]
            if run_env is None:
                continue
        elif not _available(cmd[cmd.index("--device") + 1]):
            continue
        print(" ".join(shown), flush=True)
        proc = subprocess.run([sys.executable, "-m", "gpuarrays", *cmd[1:]], capture_output=True,
                              text=True, env=run_env, cwd=ROOT, check=True)
        parts += ["```bash", " ".join(shown), "```", "", "```text", proc.stdout.rstrip(), "```",
                  ""]
    parts.append(END)
    with open(PAGE, encoding="utf-8") as f:
        text = f.read()
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(head + "\n".join(parts) + tail)
    print(f"updated {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
