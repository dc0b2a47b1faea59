"""``python -m cli``: the ``tandem`` command."""

import sys

from cli.main import main

sys.exit(main())
