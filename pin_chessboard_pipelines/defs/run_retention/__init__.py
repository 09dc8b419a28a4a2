"""Run-history retention of the high-frequency jobs."""
