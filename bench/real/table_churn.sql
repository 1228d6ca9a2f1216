-- table_churn.sql: an in-memory SQLite run for bench/real/realprog.c.
-- Rows are made, indexed, grown, deleted and grouped in a :memory:
-- database, so pages, cells, strings and sorter runs come and go through
-- sqlite3's malloc and free. @n (the row count) is set by the caller:
--   sqlite3 -cmd ".parameter set @n N" :memory: < table_churn.sql
-- Every answer has a closed form that realprog.c checks.
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c INTEGER);
WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < @n)
INSERT INTO t SELECT i, printf('%08x:%d', (i * 2654435761) % 4294967296, i), i % 1000 FROM r;
CREATE INDEX t_b ON t(b);
SELECT count(*) FROM t WHERE b >= '8';
UPDATE t SET b = b || 'x' WHERE c < 500;
DELETE FROM t WHERE c % 3 = 0;
SELECT count(*), sum(length(b)) FROM t;
SELECT count(*) FROM (SELECT c FROM t GROUP BY c);
