-- The application roles `pgrag migrate --app-role` granted (sql/functions/80_grants.sql):
-- every later migrate re-grants them, and only them, so that a table a later migration adds
-- reaches them (a role the DBA granted something else in the schema is left alone).
CREATE TABLE pgrag.app_roles (
    role_name  name PRIMARY KEY,
    granted_at timestamptz NOT NULL DEFAULT now()
);
