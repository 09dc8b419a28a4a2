"""Analytics over the chessboard replica: pure pandas computations and their store I/O."""
