"""The extra [demo] (embedded PostgreSQL, Tansu broker, Talent simulator) is optional: where it is
not installed, what needs it stops with one line naming the extra."""

from __future__ import annotations

import pytest

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.runtime.embedded import demo_module


def test_a_module_of_the_extra_is_imported_when_installed():
    assert demo_module("pin_chessboard_pipelines.talent.simulator.spec", "talent-sim").PRESETS


def test_a_missing_module_of_the_extra_is_one_line_naming_the_extra():
    with pytest.raises(ConfigError) as raised:
        demo_module("pin_chessboard_pipelines.talent.no_such_simulator", "talent-sim")
    assert str(raised.value) == (
        "talent-sim needs the extra [demo], which is not installed here "
        "(pip install 'pin_chessboard_pipelines[demo]')"
    )


def test_a_module_missing_inside_the_extra_is_not_hidden(tmp_path, monkeypatch):
    """A dependency missing inside an installed module is its own error, not 'install the extra'."""
    (tmp_path / "demo_extra_probe.py").write_text("import no_such_dependency_of_the_probe\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="no_such_dependency_of_the_probe"):
        demo_module("demo_extra_probe", "talent-sim")
