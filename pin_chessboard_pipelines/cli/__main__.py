"""`python -m pin_chessboard_pipelines.cli`: the same as `pin-chessboard`."""

import sys

from pin_chessboard_pipelines.cli import main

sys.exit(main())
