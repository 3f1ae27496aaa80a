#!/usr/bin/env bash
# GPU verification of the cuda back-end, in one run (< 8 minutes, no network).
#
# Needs: one NVIDIA GPU; CuPy, PyTorch, Numba-CUDA, cuda-bindings (+ NVRTC),
# pytest and hypothesis already installed in the Python found as $PYTHON
# (default: python3).  Run from anywhere; uses this working tree via PYTHONPATH.
# Writes everything under $OUT (default ./gpu_check_out) and prints a short
# table last.  Every section is independent and time-limited: a crash or a
# hang in one is recorded and the others still run.
set -u

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PYTHON="${PYTHON:-python3}"
OUT="${OUT:-$ROOT/gpu_check_out}"
mkdir -p "$OUT"
export PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}"
export GPUARRAYS_DEVICE=cuda:0
export PYTHONFAULTHANDLER=1
cd "$ROOT" || exit 1

log() { echo "[$(date +%H:%M:%S)] $*" | tee -a "$OUT/gpu_check.log"; }

section() {  # section NAME SECONDS -- runs benchmarks/gpu_check.py NAME
    local name="$1" limit="$2"
    log "section $name (limit ${limit}s)"
    timeout --kill-after=10 "$limit" "$PYTHON" "$HERE/gpu_check.py" "$name" "$OUT" \
        >"$OUT/$name.stdout.txt" 2>"$OUT/$name.stderr.txt"
    log "section $name exit $?"
}

{
    nvidia-smi 2>&1 || echo "nvidia-smi not available"
    "$PYTHON" -m pip list 2>/dev/null | grep -i -E "cupy|torch|numba|cuda|nvrtc|numpy|pytest|hypothesis"
} >"$OUT/environment.txt" 2>&1

section preflight 40

# The shared suite on cuda:0 (the device fixture includes cuda:0 when it loads),
# plus this back-end's own tests.  -k keeps the cuda parametrisations and the
# cuda test module; cpu/opencl runs are for CI.
# (the generated kernels' tests compile ~400 kernels with NVRTC on the first run; the
# disk cache in $OUT keeps a second run short)
export GPUARRAYS_KERNEL_CACHE="$OUT/kernel_cache"
log "section pytest (limit 300s)"
timeout --kill-after=10 300 "$PYTHON" -m pytest -q -p no:cacheprovider --maxfail=30 \
    -k "cuda" --junitxml="$OUT/pytest.xml" tests >"$OUT/pytest.txt" 2>&1
rc=$?
log "section pytest exit $rc"
"$PYTHON" - "$OUT" "$rc" <<'EOF'
import json, os, sys, xml.etree.ElementTree as ET
out, rc = sys.argv[1], int(sys.argv[2])
rows = []
try:
    suite = ET.parse(os.path.join(out, "pytest.xml")).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    a = suite.attrib
    rows.append(["tests/ -k cuda", "ok" if rc == 0 else "FAIL",
                 f"tests={a.get('tests')} failures={a.get('failures')} errors={a.get('errors')} "
                 f"skipped={a.get('skipped')} time={a.get('time')}s"])
    for case in suite.iter("testcase"):
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        if bad is not None and len(rows) < 25:
            rows.append([f"{case.get('classname')}.{case.get('name')}"[-58:], "FAIL",
                         (bad.get("message") or "")[:100]])
except (OSError, ET.ParseError) as e:
    rows.append(["tests/ -k cuda", "FAIL", f"no junit xml (exit {rc}, timeout 124): {e}"])
json.dump({"section": "pytest", "status": "ok" if rc == 0 else "fail", "rows": rows,
           "error": None}, open(os.path.join(out, "pytest.json"), "w"), indent=1)
EOF

section interop 60
section cupy_cached 30
section alloc_bench 45
section bandwidth 30
section reset 30
section compute 120
section linalg 90
section sort 60

"$PYTHON" "$HERE/gpu_check.py" table "$OUT" | tee "$OUT/summary.txt"
