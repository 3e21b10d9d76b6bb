"""``python -m numred COMMAND``: the command line (numred.tools.cli)."""
import sys

from numred.tools.cli import main

sys.exit(main())
