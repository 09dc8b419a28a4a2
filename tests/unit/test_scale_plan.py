"""The scale benchmark's plan: dataset per size, disk and time needed, the refusal line."""

from __future__ import annotations

import math

import pytest

from benchmarks.scale_plan import (
    WAL_HEADROOM,
    Need,
    Rates,
    dataset_for,
    dataset_objects,
    max_wal_size,
    need,
    parse_bytes,
    parse_sizes,
    refusal,
    relative,
)

GB = 1 << 30


def test_sizes_parse_plain_and_scientific_and_refuse_what_is_not_a_size():
    assert parse_sizes("100000,1000000,10000000") == [100_000, 1_000_000, 10_000_000]
    assert parse_sizes(" 1e5 , 20_000 ") == [100_000, 20_000]
    for bad in ("", "abc", "50", "1000.5", "100000,-1"):
        with pytest.raises(ValueError, match="--objects"):
            parse_sizes(bad)


@pytest.mark.parametrize(
    ("objects", "developers", "projects_per_developer"),
    [(20_000, 2, 100), (100_000, 10, 100), (10_000_000, 1000, 100), (5_000, 1, 50), (150_000, 15, 100)],
)
def test_a_size_is_100_objects_a_project_and_100_projects_a_developer(
    objects, developers, projects_per_developer
):
    dataset = dataset_for(objects)
    assert dataset == {
        "developers": developers,
        "projects_per_developer": projects_per_developer,
        "objects_per_project": 100,
    }
    assert dataset_objects(dataset) == objects


def test_a_size_that_is_not_a_whole_number_of_projects_rounds_up():
    assert dataset_objects(dataset_for(12_345)) >= 12_345


def test_max_wal_size_comes_from_the_settings_in_postgresql_units():
    assert parse_bytes("8GB") == 8 * GB
    assert parse_bytes("512MB") == 512 << 20
    assert parse_bytes("2048") == 2 * GB  # a bare number is MB, max_wal_size's unit
    assert max_wal_size(["shared_buffers=2GB", "max_wal_size=4GB"]) == 4 * GB
    assert max_wal_size(["max_wal_size=4GB", "max_wal_size=16GB"]) == 16 * GB  # the last one wins
    assert max_wal_size([]) == GB  # PostgreSQL's default
    with pytest.raises(ValueError, match="8GB"):
        parse_bytes("lots")


def test_the_need_grows_with_the_objects_and_counts_the_wal_once():
    rates = Rates(database_bytes=8_000, dump_bytes=2_000, seconds=0.001)
    small, large = need(100_000, rates, 8 * GB), need(10_000_000, rates, 8 * GB)
    assert small.database_bytes == math.ceil(100_000 * 8_000 + WAL_HEADROOM * 8 * GB)
    assert large.database_bytes - small.database_bytes == 9_900_000 * 8_000
    assert large.dump_bytes == 20_000_000_000
    assert large.seconds == pytest.approx(10_000)


def _need(database_bytes: int, dump_bytes: int) -> Need:
    return Need(objects=10_000_000, database_bytes=database_bytes, dump_bytes=dump_bytes, seconds=1.0)


def test_one_disk_holding_both_directories_must_hold_both_needs():
    free, device = {"/data": 100 * GB, "/tmp": 100 * GB}, {"/data": 1, "/tmp": 1}
    assert refusal(_need(60 * GB, 30 * GB), "/data", "/tmp", free, device) is None
    line = refusal(_need(80 * GB, 30 * GB), "/data", "/tmp", free, device)
    assert line == (
        "scale_bench: 10,000,000 objects need 110.0 GB on /data and /tmp, which has 100.0 GB free"
    )
    assert "\n" not in line


def test_two_disks_are_checked_each_for_its_own_need():
    free, device = {"/data": 100 * GB, "/tmp": 10 * GB}, {"/data": 1, "/tmp": 2}
    assert refusal(_need(80 * GB, 9 * GB), "/data", "/tmp", free, device) is None
    assert refusal(_need(80 * GB, 11 * GB), "/data", "/tmp", free, device) == (
        "scale_bench: 10,000,000 objects need 11.0 GB on /tmp, which has 10.0 GB free"
    )
    assert refusal(_need(101 * GB, 1 * GB), "/data", "/tmp", free, device) == (
        "scale_bench: 10,000,000 objects need 101.0 GB on /data, which has 100.0 GB free"
    )


def test_a_server_elsewhere_leaves_only_the_temporary_directory_to_check():
    free, device = {"/tmp": 10 * GB}, {"/tmp": 2}
    assert refusal(_need(1000 * GB, 1 * GB), None, "/tmp", free, device) is None
    assert refusal(_need(1 * GB, 20 * GB), None, "/tmp", free, device) is not None


def test_cpu_per_object_is_relative_to_the_smallest_size():
    assert relative([100.0, 110.0, 125.0]) == pytest.approx([1.0, 1.1, 1.25])
    assert all(math.isnan(v) for v in relative([0.0, 5.0]))
