"""``python -m benchmarks.peers.quality``: see :mod:`benchmarks.peers.quality.cli`."""

import sys

from benchmarks.peers.quality.cli import main

sys.exit(main())
