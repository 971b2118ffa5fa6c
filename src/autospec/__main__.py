"""``python -m autospec``: the same as the ``autospec`` command (slot workers run it so)."""

import sys

from autospec.cli.main import main

if __name__ == "__main__":
    sys.exit(main())
