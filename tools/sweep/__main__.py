import sys

from tools.sweep.cli import main

sys.exit(main())
