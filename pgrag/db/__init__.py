"""Database access: embedded cluster or DSN, server checks, migrations, the pool."""
