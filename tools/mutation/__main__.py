"""``python -m tools.mutation``: see tools/mutation/__init__.py."""
import sys

from tools.mutation import main

if __name__ == "__main__":
    sys.exit(main())
