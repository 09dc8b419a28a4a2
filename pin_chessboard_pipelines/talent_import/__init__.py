"""The talent initial import (seed 004, job talent-initial-import): plain Python, Dagster calls it."""
