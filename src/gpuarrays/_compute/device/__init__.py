"""Device kernels of the compute layer: expressions, the generator, the launcher, caches.

``launcher.elementwise`` is what the dispatch calls on opencl and cuda devices;
docs/kernels.md describes the whole package.
"""
