"""The Dagster resource never improvises a store: without CHESSBOARD_DATABASE_URL it refuses."""

from __future__ import annotations

import dagster as dg
import pytest

from pin_chessboard_pipelines.defs.resources import ChessboardResource


def test_without_a_database_url_the_resource_refuses_to_initialise(monkeypatch, tmp_path):
    monkeypatch.delenv("CHESSBOARD_DATABASE_URL", raising=False)
    monkeypatch.setenv("PIN_CHESSBOARD_STATE_DIR", str(tmp_path))
    with pytest.raises(Exception) as raised, dg.build_resources({"chessboard": ChessboardResource()}):
        pass
    messages = []
    error: BaseException | None = raised.value
    while error is not None:
        messages.append(str(error))
        error = error.__cause__
    assert (
        "CHESSBOARD_DATABASE_URL is not set: expected a postgresql:// URL of the chessboard store" in messages
    )
    assert not (tmp_path / "pgdata").exists()  # no scratch server


def test_a_configured_url_is_the_store(monkeypatch):
    monkeypatch.setenv("CHESSBOARD_DATABASE_URL", "postgresql://u@db.example/chessboard")
    assert ChessboardResource().url == "postgresql://u@db.example/chessboard"
    assert ChessboardResource(database_url="postgresql://u@other/x").url == "postgresql://u@other/x"
