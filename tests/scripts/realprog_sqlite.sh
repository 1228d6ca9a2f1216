#!/usr/bin/env bash
# realprog_sqlite.sh: sqlite3 bulk-inserts 200k rows (one transaction,
# deterministic keys, numbers and variable-length text), builds an index,
# updates and deletes some rows, then runs aggregate, join, ordering and
# GROUP BY queries with checksums. Run on an in-memory database with a
# 64 MiB page cache (so the cache lives in malloc'd memory), without and
# with LD_PRELOAD=$HPM_LIB: the outputs must be identical.
# Prints "N passed, N failed".
source "$(dirname "$0")/common.bash"
require_lib
require_tool sqlite3
t_tmpdir
cat >"$tmp/work.sql" <<'SQL'
PRAGMA cache_size = -65536;

DROP TABLE IF EXISTS t;
DROP TABLE IF EXISTS g;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v INTEGER, s TEXT);
BEGIN;
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000)
INSERT INTO t SELECT x,
    printf('k%08d-%x', (x * 7919) % 1000003, (x * 2654435761) % 4294967296),
    (x * 48271) % 2147483647,
    replace(hex(zeroblob(x % 97)), '00', char(65 + x % 26, 97 + x % 19))
  FROM c;
COMMIT;
CREATE INDEX t_k ON t(k);
CREATE INDEX t_v ON t(v);
UPDATE t SET s = s || s || 'x' WHERE id % 7 = 0;
DELETE FROM t WHERE id % 11 = 0;
CREATE TABLE g AS SELECT id % 1000 AS grp, count(*) AS n, sum(v) AS total FROM t GROUP BY grp;
SELECT count(*), sum(v), sum(length(s)), max(k), min(k) FROM t;
SELECT sum((v % 1000003) * (id % 1009)) % 1000000007 FROM t;
SELECT k, v, length(s) FROM t ORDER BY k LIMIT 5;
SELECT k, v FROM t WHERE k BETWEEN 'k00500000' AND 'k00500100' ORDER BY k;
SELECT count(*), sum(t.v % 1000) FROM t JOIN g ON t.id % 1000 = g.grp WHERE g.n > 180;
SELECT grp, n, total FROM g ORDER BY total DESC LIMIT 5;
SELECT sum(length(group_concat_s)) FROM (SELECT group_concat(s, ',') AS group_concat_s FROM t GROUP BY id % 100);
SELECT count(DISTINCT substr(s, 1, 6)) FROM t;
SQL
compare_runs "sqlite3" sqlite3 -batch :memory: ".read $tmp/work.sql"
t_done
