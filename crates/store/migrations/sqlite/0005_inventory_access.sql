-- What the policy would do with a call of each inventoried tool, for each configured caller identity (a JSON array
-- of {"caller", "verdict", "rule"}): the console shows who sees a tool and who must confirm, instead of a single
-- "listed" that ignores scopes and modes. Rows written before this column existed say nothing ('[]').
ALTER TABLE tool_inventory ADD COLUMN access TEXT NOT NULL DEFAULT '[]';
