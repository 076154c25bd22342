"""status changes notified per submission: a row trigger on submissions names the row and, when it entered or left
the queue or moved in it, the time from which queue positions moved

Migration 0005's statement trigger said only "something changed", so every upload, heartbeat and live verdict
dropped every status answer each web process kept (grader/app/status_cache.py). The row trigger's payload is
"ID" (that submission's answers only) or "ID EPOCH" (and every answer queued at or after EPOCH: a queued
submission's position counts the queued ones before it). TRUNCATE keeps the statement trigger (everything).

Revision ID: 0007_rows
Revises: 0006_due
Create Date: 2026-12-07
"""
from alembic import op

revision = '0007_rows'
down_revision = '0006_due'
branch_labels = None
depends_on = None

CHANNEL = "grader_status"
STATEMENT = "grader_status_changed"  # migration 0005's function and triggers
FUNCTION = "grader_status_row_changed"


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    # A row's queue membership or time changed: positions from the earlier of its old and new times on moved.
    # A queued row without a time is counted before no one (store.queued_before compares times), so none moved.
    op.execute(f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    row_id bigint;
    moved_from timestamp;
BEGIN
    IF TG_OP = 'DELETE' THEN row_id := OLD.id; ELSE row_id := NEW.id; END IF;
    IF TG_OP <> 'INSERT' AND OLD.status = 'queued' AND (TG_OP = 'DELETE' OR NEW.status <> 'queued'
            OR NEW.enqueued_at IS DISTINCT FROM OLD.enqueued_at) THEN
        moved_from := OLD.enqueued_at;
    END IF;
    IF TG_OP <> 'DELETE' AND NEW.status = 'queued' AND (TG_OP = 'INSERT' OR OLD.status <> 'queued'
            OR NEW.enqueued_at IS DISTINCT FROM OLD.enqueued_at) THEN
        moved_from := least(moved_from, NEW.enqueued_at);
    END IF;
    PERFORM pg_notify('{CHANNEL}', row_id::text || coalesce(' ' || extract(epoch FROM moved_from)::text, ''));
    RETURN NULL;
END $$""")
    op.execute(f"DROP TRIGGER IF EXISTS {STATEMENT} ON submissions")
    op.execute(f"CREATE TRIGGER {STATEMENT} AFTER TRUNCATE ON submissions FOR EACH STATEMENT EXECUTE FUNCTION "
               f"{STATEMENT}()")
    op.execute(f"CREATE TRIGGER {FUNCTION} AFTER INSERT OR UPDATE OR DELETE ON submissions FOR EACH ROW "
               f"EXECUTE FUNCTION {FUNCTION}()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"DROP TRIGGER IF EXISTS {FUNCTION} ON submissions")
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
    op.execute(f"DROP TRIGGER IF EXISTS {STATEMENT} ON submissions")
    op.execute(f"CREATE TRIGGER {STATEMENT} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON submissions "
               f"FOR EACH STATEMENT EXECUTE FUNCTION {STATEMENT}()")
