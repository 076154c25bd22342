"""course rules: pinned rubric versions, assignment state, dates and rules, extensions, roster states, the
counted submission a student chose, graders, line comments and feedback visibility per item

Revision ID: 0004_rules
Revises: 0003_partial
Create Date: 2026-12-02
"""
from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import postgresql

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")

revision = '0004_rules'
down_revision = '0003_partial'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'rubrics',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('version', sa.String(length=64), nullable=False),
        sa.Column('digest', sa.String(length=64), nullable=False),
        sa.Column('title', sa.String(length=200), nullable=False),
        sa.Column('filename', sa.String(length=255), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('instructor_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['instructor_id'], ['instructors.id'], name=op.f('fk_rubrics_instructor_id_instructors')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_rubrics')),
        sa.UniqueConstraint('digest', name=op.f('uq_rubrics_digest')))
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.add_column(sa.Column('rubric_id', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('state', sa.String(length=16), nullable=False, server_default='open'))
        batch_op.add_column(sa.Column('opens_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('due_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('rules', JSON, nullable=False, server_default='{}'))
        batch_op.create_foreign_key(batch_op.f('fk_assignments_rubric_id_rubrics'), 'rubrics', ['rubric_id'], ['id'])
    with op.batch_alter_table('students', schema=None) as batch_op:
        batch_op.add_column(sa.Column('deactivated_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('removed_at', sa.DateTime(), nullable=True))
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.add_column(sa.Column('chosen_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('grader_id', sa.Integer(), nullable=True))
        batch_op.create_foreign_key(batch_op.f('fk_submissions_grader_id_instructors'), 'instructors', ['grader_id'], ['id'])
    op.create_table(
        'extensions',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('assignment_id', sa.Integer(), nullable=False),
        sa.Column('student_id', sa.Integer(), nullable=False),
        sa.Column('due_at', sa.DateTime(), nullable=True),
        sa.Column('extra_attempts', sa.Integer(), nullable=False),
        sa.Column('reason', sa.Text(), nullable=False),
        sa.Column('instructor_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_extensions_assignment_id_assignments'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['student_id'], ['students.id'], name=op.f('fk_extensions_student_id_students')),
        sa.ForeignKeyConstraint(['instructor_id'], ['instructors.id'], name=op.f('fk_extensions_instructor_id_instructors')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_extensions')),
        sa.UniqueConstraint('assignment_id', 'student_id', name=op.f('uq_extensions_assignment_id_student_id')))
    op.create_index(op.f('ix_extensions_assignment_id'), 'extensions', ['assignment_id'])
    op.create_index(op.f('ix_extensions_student_id'), 'extensions', ['student_id'])
    op.create_table(
        'line_comments',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('submission_id', sa.Integer(), nullable=False),
        sa.Column('line', sa.Integer(), nullable=False),
        sa.Column('text', sa.Text(), nullable=False),
        sa.Column('instructor_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['submission_id'], ['submissions.id'], name=op.f('fk_line_comments_submission_id_submissions'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['instructor_id'], ['instructors.id'], name=op.f('fk_line_comments_instructor_id_instructors')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_line_comments')))
    op.create_index(op.f('ix_line_comments_submission_id'), 'line_comments', ['submission_id'])
    op.create_table(
        'feedback_rules',
        sa.Column('id', sa.Integer(), nullable=False),
        sa.Column('assignment_id', sa.Integer(), nullable=False),
        sa.Column('key', sa.String(length=64), nullable=False),
        sa.Column('level', sa.String(length=16), nullable=False),
        sa.Column('later_level', sa.String(length=16), nullable=True),
        sa.Column('switch_at', sa.DateTime(), nullable=True),
        sa.Column('instructor_id', sa.Integer(), nullable=True),
        sa.Column('created_at', sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(['assignment_id'], ['assignments.id'], name=op.f('fk_feedback_rules_assignment_id_assignments'), ondelete='CASCADE'),
        sa.ForeignKeyConstraint(['instructor_id'], ['instructors.id'], name=op.f('fk_feedback_rules_instructor_id_instructors')),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_feedback_rules')),
        sa.UniqueConstraint('assignment_id', 'key', name=op.f('uq_feedback_rules_assignment_id_key')))
    op.create_index(op.f('ix_feedback_rules_assignment_id'), 'feedback_rules', ['assignment_id'])


def downgrade() -> None:
    op.drop_index(op.f('ix_feedback_rules_assignment_id'), table_name='feedback_rules')
    op.drop_table('feedback_rules')
    op.drop_index(op.f('ix_line_comments_submission_id'), table_name='line_comments')
    op.drop_table('line_comments')
    op.drop_index(op.f('ix_extensions_student_id'), table_name='extensions')
    op.drop_index(op.f('ix_extensions_assignment_id'), table_name='extensions')
    op.drop_table('extensions')
    with op.batch_alter_table('submissions', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_submissions_grader_id_instructors'), type_='foreignkey')
        batch_op.drop_column('grader_id')
        batch_op.drop_column('chosen_at')
    with op.batch_alter_table('students', schema=None) as batch_op:
        batch_op.drop_column('removed_at')
        batch_op.drop_column('deactivated_at')
    with op.batch_alter_table('assignments', schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f('fk_assignments_rubric_id_rubrics'), type_='foreignkey')
        batch_op.drop_column('rules')
        batch_op.drop_column('due_at')
        batch_op.drop_column('opens_at')
        batch_op.drop_column('state')
        batch_op.drop_column('rubric_id')
    op.drop_table('rubrics')
