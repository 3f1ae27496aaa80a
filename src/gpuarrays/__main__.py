"""``python -m gpuarrays``: the command line (see ``gpuarrays.cli``)."""

from .cli import main

raise SystemExit(main())
