-- Caller names are keyed hashes from now on (pgrag/services/caller_names.py). The names
-- stored before were `key:` and the first 10 hex of an unsalted SHA-256 of the API key:
-- 40 bits that confirm an offline guess of the key. They become `key:legacy`: the rows
-- stay, the oracle goes. A grant approved under such a name keeps working but no longer
-- names its approver.
UPDATE pgrag.audit_log SET caller = 'key:legacy' WHERE caller ~ '^key:[0-9a-f]{10}$';
UPDATE pgrag.search_log SET caller = 'key:legacy' WHERE caller ~ '^key:[0-9a-f]{10}$';
UPDATE pgrag.eval_cases SET created_by = 'key:legacy' WHERE created_by ~ '^key:[0-9a-f]{10}$';
UPDATE pgrag.oauth_grants SET owner = 'key:legacy' WHERE owner ~ '^key:[0-9a-f]{10}$';
