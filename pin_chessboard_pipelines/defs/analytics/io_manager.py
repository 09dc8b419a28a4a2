"""A small IO manager for day-partitioned DataFrame assets stored in PostgreSQL tables.

Writing a partition replaces that day's rows only, in one transaction, by COPY (analytics/store.py);
loading one reads the day's rows back. The table is the asset's `dagster/table_name`.
"""

from collections.abc import Callable, Mapping
from datetime import date

import dagster as dg
import pandas as pd
from sqlalchemy.engine import Connection

from pin_chessboard_pipelines.analytics.store import read_inventory_day, replace_inventory_day
from pin_chessboard_pipelines.defs.metadata import TABLE_NAME_KEY, table_name
from pin_chessboard_pipelines.defs.resources import ChessboardResource
from pin_chessboard_pipelines.store.tables import project_inventory_daily

Writer = Callable[[Connection, date, pd.DataFrame], int]
Reader = Callable[[Connection, date], pd.DataFrame]

# Tables this IO manager knows, by `dagster/table_name`: (write one day, read one day).
DAY_TABLES: dict[str, tuple[Writer, Reader]] = {
    table_name(project_inventory_daily): (replace_inventory_day, read_inventory_day),
}


class DailyTableIOManager(dg.ConfigurableIOManager):
    """DataFrames of daily-partitioned assets in the chessboard store, one day per partition."""

    chessboard: ChessboardResource

    def handle_output(self, context: dg.OutputContext, obj: pd.DataFrame) -> None:
        write, _ = self._table(context.definition_metadata)
        day = date.fromisoformat(context.asset_partition_key)
        with self.chessboard.engine.begin() as conn:
            rows = write(conn, day, obj)
        context.log.info(f"{_table_name(context.definition_metadata)}: {rows} row(s) of {day} replaced")

    def load_input(self, context: dg.InputContext) -> pd.DataFrame:
        _, read = self._table(context.upstream_output.definition_metadata if context.upstream_output else {})
        day = date.fromisoformat(context.asset_partition_key)
        with self.chessboard.engine.connect() as conn:
            return read(conn, day)

    @staticmethod
    def _table(metadata: Mapping[str, object] | None) -> tuple[Writer, Reader]:
        name = _table_name(metadata)
        if name not in DAY_TABLES:
            raise dg.Failure(f"DailyTableIOManager: no day table for {TABLE_NAME_KEY}={name!r}")
        return DAY_TABLES[name]


def _table_name(metadata: Mapping[str, object] | None) -> str:
    value = (metadata or {}).get(TABLE_NAME_KEY)
    return str(getattr(value, "value", value))
