"""``python -m simnode`` = the ``simnode`` command."""
import sys

from simnode.cli import main

sys.exit(main())
