"""The image tests (test_image.py: podman builds the Dockerfile, minutes) are a tier of their own,
`make image-tests` (CHESSBOARD_IMAGE_TESTS=1), beside `make faults`: `make test` does not collect them.
"""

import os

if os.environ.get("CHESSBOARD_IMAGE_TESTS") != "1":
    collect_ignore = ["test_image.py"]
