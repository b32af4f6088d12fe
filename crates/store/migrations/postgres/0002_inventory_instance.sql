-- Each gateway process's own view of the inventory (SQLite's migration 13): `instance` joins the key, so processes
-- sharing the store keep their listings side by side and a merged view is read from them.
ALTER TABLE tool_inventory ADD COLUMN instance TEXT NOT NULL DEFAULT '';
ALTER TABLE tool_inventory DROP CONSTRAINT tool_inventory_pkey;
ALTER TABLE tool_inventory ADD PRIMARY KEY (upstream, tool, instance);
