"""`python -m repair.data.demo DATA_DIR [--coverage]`."""

import sys

from repair.data.demo.coverage import main

main(sys.argv[1:])
