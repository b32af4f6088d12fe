-- Why an approval lapsed: its call ended (timed out, cancelled, client gone, gateway stopped) before anyone decided
-- or before it was used. A lapsed approval also has expires_us set to the moment it lapsed, so every query that
-- excludes expired approvals (listing, deciding, consuming) excludes it too; this column is what lets a person be
-- told that nothing waits any more, instead of only "expired".
ALTER TABLE approvals ADD COLUMN lapsed_why TEXT;
