"""The one advisory-lock key derivation and the lock names of the jobs."""

from __future__ import annotations

import hashlib

from pin_chessboard_pipelines.events.relay import RELAY_LOCK
from pin_chessboard_pipelines.store.lock import AdvisoryLock, lock_key
from pin_chessboard_pipelines.store.migrate import MIGRATION_LOCK
from pin_chessboard_pipelines.talent.topics import TALENT_SYNC_LOCK
from pin_chessboard_pipelines.talent_import.lock import LOCK, LOCK_NAME


def test_the_lock_key_is_the_first_8_bytes_of_the_sha256_of_the_lock_name():
    assert LOCK_NAME == "Pin:lock:job:chessboard-talent-initial-import"
    digest = hashlib.sha256(LOCK_NAME.encode()).digest()
    assert lock_key(LOCK_NAME) == LOCK.key == int.from_bytes(digest[:8], "big", signed=True)
    assert -(2**63) <= LOCK.key < 2**63
    assert lock_key("other") != LOCK.key


def test_every_job_lock_has_its_own_name_and_key():
    locks = [LOCK, RELAY_LOCK, TALENT_SYNC_LOCK, MIGRATION_LOCK]
    assert len({lock.name for lock in locks}) == len({lock.key for lock in locks}) == 4
    assert all(lock.name.startswith("Pin:lock:job:chessboard-") for lock in locks)
    assert AdvisoryLock(RELAY_LOCK.name).key == RELAY_LOCK.key
