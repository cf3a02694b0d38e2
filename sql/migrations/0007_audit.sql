-- Every tool call: which tool, its arguments (content elided), who, how long, the outcome.
CREATE TABLE pgrag.audit_log (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    created_at  timestamptz NOT NULL DEFAULT now(),
    tool        text NOT NULL,
    arguments   jsonb NOT NULL,
    caller      text NOT NULL,
    duration_ms real NOT NULL,
    outcome     text NOT NULL,   -- SUCCESS, TOKEN_LIMIT_REACHED, ... or an error code
    trace_id    text NOT NULL
);
CREATE INDEX audit_log_created_idx ON pgrag.audit_log (created_at);
CREATE INDEX audit_log_trace_idx ON pgrag.audit_log (trace_id);
