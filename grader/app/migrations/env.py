"""Alembic environment: the connection comes from grader.app.db (`grader db upgrade`, or app startup)."""
from alembic import context
from sqlalchemy import create_engine

from grader.app.models import Base

config = context.config
target_metadata = Base.metadata


def run(connection) -> None:
    """Migrate over one connection; batch mode lets SQLite alter tables."""
    context.configure(connection=connection, target_metadata=target_metadata,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if connection is not None:
    run(connection)
else:  # plain `alembic -x url=... upgrade head`, for the odd manual use
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    with create_engine(url).connect() as conn:
        run(conn)
        conn.commit()
