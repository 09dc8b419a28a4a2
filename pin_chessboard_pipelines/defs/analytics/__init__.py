"""Dagster shell of the analytics: the daily inventory asset, its checks, schedules and IO manager."""
