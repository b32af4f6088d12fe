-- The risk class of the tool an approval is for (core's facts: risk 0-4 and category), so a person sees how much is
-- at stake without opening the tool. Nullable: approvals queued by an older gateway have none.
ALTER TABLE approvals ADD COLUMN risk_level INTEGER CHECK (risk_level BETWEEN 0 AND 4);
ALTER TABLE approvals ADD COLUMN risk_category TEXT;
