"""Shared fixtures: every test that takes ``device`` runs on every available device."""

from __future__ import annotations

import gc

import pytest

import gpuarrays as ga

DEVICES = [str(d) for d in ga.devices()]


@pytest.fixture(params=DEVICES)
def device(request) -> ga.Device:
    """Each available device in turn (cpu:0 always; opencl:0 with PoCL; cuda:N with a GPU).

    Leaves the device as it found it: no limit, queued frees applied.
    """
    dev = ga.get_device(request.param)
    yield dev
    ga.set_memory_limit(None, dev)
    gc.collect()
    dev.memory.apply_pending()


@pytest.fixture
def used(device):
    """``used()`` returns the device's ``used_bytes`` now (queued frees applied)."""
    def current() -> int:
        gc.collect()
        return ga.memory_stats(device)["used_bytes"]
    return current
