"""`enqueue_recalc` and `release_import_requests` by their former home: they live in
recalc/queue.py, the one module of the queue's SQL."""

from pin_chessboard_pipelines.recalc.queue import enqueue_recalc, release_import_requests

__all__ = ["enqueue_recalc", "release_import_requests"]
