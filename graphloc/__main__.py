"""``python -m graphloc ...``: the ``graphloc`` command line."""

from graphloc.cli import main

raise SystemExit(main())
