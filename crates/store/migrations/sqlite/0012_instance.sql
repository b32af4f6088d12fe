-- Which gateway process wrote each audit row and queued each approval: its instance id (configured, or generated
-- once and kept in the state directory), so rows of several processes sharing one store say whose they are, and a
-- restarted process can lapse the approvals its previous run left waiting. Rows written before say nothing (NULL);
-- the column joins the chain hash only where it is set, so they still verify.
ALTER TABLE audit_log ADD COLUMN instance TEXT;
ALTER TABLE approvals ADD COLUMN instance TEXT;
