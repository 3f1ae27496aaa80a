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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "performance.md")
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
COMMANDS = (["gpuarrays", "bench", "--device", "cpu:0"],
            ["gpuarrays", "bench", "--device", "opencl:0", "--quick"])


def _available(spec: str) -> bool:
    sys.path.insert(0, os.path.join(ROOT, "src"))
    import gpuarrays as ga

    return spec in {str(d) for d in ga.devices()}


def main() -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.join(ROOT, "src"),
                                                    env.get("PYTHONPATH")) if p)
    parts = [START, "",
             f"Measured {datetime.date.today().isoformat()} on {platform.machine()}, "
             f"{os.cpu_count()} CPU cores, Python {platform.python_version()}.", ""]
    for cmd in COMMANDS:
        if not _available(cmd[cmd.index("--device") + 1]):
            continue
        proc = subprocess.run([sys.executable, "-m", "gpuarrays", *cmd[1:]], capture_output=True,
                              text=True, env=env, cwd=ROOT, check=True)
        parts += ["```bash", " ".join(cmd), "```", "", "```text", proc.stdout.rstrip(), "```", ""]
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
