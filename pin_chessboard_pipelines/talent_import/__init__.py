"""The talent initial import (docs/talent-initial-import.md): plain Python, Dagster calls it."""
