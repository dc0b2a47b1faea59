"""The ``tandem`` command: one module per subcommand.

The core is chosen here, first (``scaling/__init__.py``): ``TANDEM_CORE=compiled`` without a build
of these sources, or an unknown ``TANDEM_CORE``, ends every command with one line and exit code 2
(a usage error) rather than a traceback.
"""

import sys

try:
    import scaling  # noqa: F401
except RuntimeError as exc:
    if type(exc).__name__ != "CoreUnavailable":
        raise
    print(f"tandem: {exc}", file=sys.stderr)
    sys.exit(2)
