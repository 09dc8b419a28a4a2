-- Alembic's environment (store/migrations/env.py).

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS chessboard
