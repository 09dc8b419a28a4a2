"""Configuration: defaults, and one clear error per invalid variable."""

from __future__ import annotations

import pytest

from pin_chessboard_pipelines.errors import ConfigError
from pin_chessboard_pipelines.settings import load_settings, redact_url


def test_defaults_need_no_environment():
    settings = load_settings({})
    assert settings.database_url is None
    assert settings.import_page_size == 500
    assert settings.import_lease_seconds == 600
    assert settings.import_lock_timeout_seconds == 300
    assert settings.recalc_debounce_seconds == 30
    assert settings.recalc_cap_seconds == 300
    assert settings.recalc_batch_size == 50
    assert settings.recalc_poison_attempts == 5
    assert settings.talent_sync_enabled is True
    assert settings.talent_api_timeout_seconds == 30
    assert settings.import_page_retry_seconds == 600
    assert settings.dagster_executor == "in_process"


@pytest.mark.parametrize(
    ("name", "value", "expects"),
    [
        ("CHESSBOARD_DATABASE_URL", "mysql://db/x", "a postgresql:// URL"),
        ("TALENT_API_URL", "ftp://talent", "an http(s):// URL"),
        ("KAFKA_BOOTSTRAP_SERVERS", "localhost", "host:port"),
        ("CHESSBOARD_TALENT_SYNC_ENABLED", "maybe", "true or false"),
        ("CHESSBOARD_IMPORT_PAGE_SIZE", "0", "1..2000"),
        ("CHESSBOARD_IMPORT_PAGE_SIZE", "2001", "1..2000"),
        ("CHESSBOARD_IMPORT_PAGE_SIZE", "many", "1..2000"),
        ("CHESSBOARD_IMPORT_LEASE_SECONDS", "-1", "seconds"),
        ("CHESSBOARD_IMPORT_LOCK_TIMEOUT_SECONDS", "soon", "seconds"),
        ("CHESSBOARD_RECALC_DEBOUNCE_SECONDS", "-5", "seconds"),
        ("CHESSBOARD_RECALC_CAP_SECONDS", "nan", "seconds"),
        ("CHESSBOARD_RECALC_BATCH_SIZE", "0", "1..10000"),
        ("CHESSBOARD_RECALC_POISON_ATTEMPTS", "0", "1..1000"),
        ("TALENT_API_TIMEOUT_SECONDS", "0", "seconds > 0"),
        ("TALENT_API_TIMEOUT_SECONDS", "forever", "seconds > 0"),
        ("CHESSBOARD_IMPORT_PAGE_RETRY_SECONDS", "-1", "seconds >= 0"),
        ("CHESSBOARD_DAGSTER_EXECUTOR", "celery", "in_process | multiprocess | k8s"),
        ("CHESSBOARD_RECALC_DRAINS", "0", "1..16"),
        ("CHESSBOARD_RECALC_DRAINS", "17", "1..16"),
        ("CHESSBOARD_RECALC_DRAINS", "two", "1..16"),
    ],
)
def test_invalid_value_names_the_variable_and_what_it_expects(name, value, expects):
    with pytest.raises(ConfigError) as raised:
        load_settings({name: value})
    message = str(raised.value)
    assert message.startswith(f"{name}=")
    assert expects in message
    assert "\n" not in message


def test_recalc_drains_default_to_one():
    assert load_settings({}).recalc_drains == 1
    assert load_settings({"CHESSBOARD_RECALC_DRAINS": "4"}).recalc_drains == 4


def test_flag_accepts_the_usual_spellings():
    assert load_settings({"CHESSBOARD_TALENT_SYNC_ENABLED": "false"}).talent_sync_enabled is False
    assert load_settings({"CHESSBOARD_TALENT_SYNC_ENABLED": "1"}).talent_sync_enabled is True


def test_secrets_never_in_repr():
    settings = load_settings(
        {"TALENT_API_TOKEN": "s3cret-token", "CHESSBOARD_DATABASE_URL": "postgresql://u:pw123@db/x"}
    )
    assert "s3cret-token" not in repr(settings)
    assert "pw123" not in repr(settings)
    assert redact_url("postgresql://u:pw123@db/x") == "postgresql://u:***@db/x"
