"""feedback rules "at the due date" follow the due date: a flag instead of a copy of the date

A rule set to switch at the due date kept the date it had when saved, so moving the due date later released hidden
feedback at the old one. switch_at stays as it was (the date when saved; used if the due date is removed).

Revision ID: 0006_due
Revises: 0005_notify
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa

revision = '0006_due'
down_revision = '0005_notify'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('feedback_rules') as batch:
        batch.add_column(sa.Column('switch_at_due', sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table('feedback_rules') as batch:
        batch.drop_column('switch_at_due')
