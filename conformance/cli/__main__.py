"""``python -m conformance.cli``: the one command line."""

import sys

from conformance.cli import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
