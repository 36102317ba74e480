"""``python -m reviewbert``: the command line (``reviewbert.cli``)."""
import sys

from reviewbert.cli import main

if __name__ == "__main__":
    sys.exit(main())
