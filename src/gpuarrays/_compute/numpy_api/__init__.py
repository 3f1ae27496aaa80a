"""NumPy's functions beyond the array API standard, on every device (docs/numpy.md).

Each module holds one family, written with NumPy's signatures (parameter names and
defaults) as compositions of the namespace's device functions -- never a round trip
through host memory, except the host module's printing and file functions, whose work
is on the host by nature.  ``gpuarrays/__init__.py`` exports every name in ``__all__``
as ``ga.<name>``; ``numpy_protocol.FUNCTIONS`` routes ``np.<name>(gpuarray, ...)`` to
the same function.
"""

from __future__ import annotations

from . import aliases, host, indexing, mathfuncs, products, shapes, statistics
from .aliases import *  # noqa: F403
from .host import *  # noqa: F403
from .indexing import *  # noqa: F403
from .mathfuncs import *  # noqa: F403
from .products import *  # noqa: F403
from .shapes import *  # noqa: F403
from .statistics import *  # noqa: F403

__all__ = [*aliases.__all__, *host.__all__, *indexing.__all__, *mathfuncs.__all__, *products.__all__,
           *shapes.__all__, *statistics.__all__]
