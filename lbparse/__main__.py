import sys

from lbparse.cli import main

sys.exit(main())
