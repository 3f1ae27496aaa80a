"""Hypothesis profiles and run sizes of the reliability suite.

``GPUARRAYS_TEST_PROFILE=ci`` (default) keeps the reliability files (stateful,
fault injection, threads, bad inputs) at about two minutes on both devices of a
two-core machine; ``GPUARRAYS_TEST_PROFILE=long`` runs randomised and much
longer (the figures in docs/reliability.md come from such a run).

The profiles are registered here and *not* loaded globally: the reliability
tests pass ``PROFILE`` explicitly, so other test files keep their own settings.

``GPUARRAYS_RELIABILITY_LOG=path`` makes the tests append one JSON line per
finished run with its figures (sequences, steps, faults, operations), which is
how docs/reliability.md is filled in.
"""

from __future__ import annotations

import json
import os
import threading

from hypothesis import HealthCheck, settings

_COMMON = dict(
    deadline=None,
    database=None,  # nothing written into the work tree
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.filter_too_much],
)

settings.register_profile("ci", max_examples=25, stateful_step_count=40, derandomize=True,
                          **_COMMON)
settings.register_profile("long", max_examples=150, stateful_step_count=60,
                          derandomize=False, **_COMMON)

NAME = os.environ.get("GPUARRAYS_TEST_PROFILE", "ci")
if NAME not in ("ci", "long"):
    raise ValueError(f"GPUARRAYS_TEST_PROFILE={NAME!r}: expected 'ci' or 'long'")
PROFILE = settings.get_profile(NAME)
LONG = NAME == "long"

# Sizes of the non-hypothesis runs.
THREADS = 8 if LONG else 6
THREAD_OPS = 1500 if LONG else 250  # operations per thread
THREAD_ROUNDS = 3 if LONG else 1  # threaded runs per device (each with one reset)

_log_lock = threading.Lock()


def record(test: str, **figures) -> None:
    """Append the figures of one finished run to ``$GPUARRAYS_RELIABILITY_LOG`` (if set)."""
    path = os.environ.get("GPUARRAYS_RELIABILITY_LOG")
    if not path:
        return
    line = json.dumps({"test": test, "profile": NAME, **figures}, sort_keys=True)
    with _log_lock, open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
