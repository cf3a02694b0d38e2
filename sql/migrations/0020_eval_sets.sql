-- Stored evaluation sets: cases in the `pgrag eval` format (one JSON object per case: query,
-- document, optional location, answer, mode, category), written by the console's "save as
-- evaluation case" and by `pgrag eval --save-set`, read by `pgrag eval --set` and the
-- console; and each run of a set with its report, so that a change of model, fusion or
-- chunking shows as a before/after. Operator tables, like pgrag.search_log: collection-
-- scoped keys neither read nor write them.

CREATE TABLE pgrag.eval_cases (
    id         bigserial PRIMARY KEY,
    set_name   text NOT NULL CHECK (length(set_name) BETWEEN 1 AND 200),
    query      jsonb NOT NULL CHECK (jsonb_typeof(query) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now(),
    created_by text
);
CREATE INDEX eval_cases_set ON pgrag.eval_cases (set_name, id);

CREATE TABLE pgrag.eval_runs (
    id         bigserial PRIMARY KEY,
    set_name   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    model      text,
    modes      text[] NOT NULL,
    summary    jsonb NOT NULL,   -- per mode: overall, categories, language pairs
    queries    jsonb NOT NULL    -- every query's outcome
);
CREATE INDEX eval_runs_set ON pgrag.eval_runs (set_name, id);
