-- pgbench: one reservation per transaction, as our Reserve does it: the stock row is
-- decremented only if enough is available, and a hold row is written only if it was.
\set k random(0, 9999)
\set n 1
BEGIN;
WITH taken AS (
  UPDATE stock SET available = available - :n
  WHERE sku = 'bench-' || :k AND available >= :n
  RETURNING sku
)
INSERT INTO holds (sku, quantity) SELECT sku, :n FROM taken;
COMMIT;
