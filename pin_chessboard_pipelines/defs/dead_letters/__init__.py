"""The replay of the consumers' dead letters as a Dagster job (docs/events.md#dead-letters)."""
