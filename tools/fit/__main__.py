import sys

from tools.fit.cli import main

sys.exit(main(sys.argv[1:]))
