"""status changes notified: a statement trigger on each table a status answer reads NOTIFYs grader_status

The web processes keep recent status answers (grader/app/status_cache.py) and drop them all when a notification
comes: PostgreSQL delivers it when the writing transaction commits, whichever process wrote. SQLite has no
NOTIFY, and there the status is not cached.

Revision ID: 0005_notify
Revises: 0004_rules
Create Date: 2026-12-02
"""
from alembic import op

revision = '0005_notify'
down_revision = '0004_rules'
branch_labels = None
depends_on = None

CHANNEL = "grader_status"
FUNCTION = "grader_status_changed"
# Every table a status answer reads: the submission (and the queue position: other submissions), its assignment
# (checks), rubric and feedback rules (what a student may read of the progress), the student and the token.
TABLES = ("submissions", "assignments", "rubrics", "feedback_rules", "releases", "students", "tokens")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(f"""CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END $$""")
    for table in TABLES:
        op.execute(f"CREATE TRIGGER {FUNCTION} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                   f"FOR EACH STATEMENT EXECUTE FUNCTION {FUNCTION}()")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in TABLES:
        op.execute(f"DROP TRIGGER IF EXISTS {FUNCTION} ON {table}")
    op.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
