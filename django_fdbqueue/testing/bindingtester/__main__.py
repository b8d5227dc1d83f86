"""``python -m django_fdbqueue.testing.bindingtester``: see ``command``."""

from __future__ import annotations

import sys

from .command import main

if __name__ == "__main__":
    sys.exit(main())
