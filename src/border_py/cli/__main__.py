"""``python -m border_py.cli``: the ``border`` command."""

import sys

from border_py.cli.main import main

sys.exit(main())
