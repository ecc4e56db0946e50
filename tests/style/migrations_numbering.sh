#!/usr/bin/env bash
# db/embed_migrations.cmake refuses migrations that are not numbered 0001, 0002, ... (a gap or a
# duplicate would make db.c skip or reorder one) and embeds the real set.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
embed() { cmake -DFILES="$1" -DOUT="$t/out.c" -P "$src/db/embed_migrations.cmake"; }
for f in 0001_a 0002_b 0002_c 0004_d; do echo "SELECT 1;" >"$t/$f.sql"; done
embed "$t/0001_a.sql;$t/0002_b.sql" && grep -q "hc_migrations_count = 2" "$t/out.c"
! embed "$t/0001_a.sql;$t/0004_d.sql" 2>"$t/gap.err"
grep -q "0004_d.sql is number 4, expected 2" "$t/gap.err"
! embed "$t/0001_a.sql;$t/0002_b.sql;$t/0002_c.sql" 2>"$t/dup.err"
grep -q "0002_c.sql is number 2, expected 3" "$t/dup.err"
real=$(ls "$src"/db/migrations/*.sql | sort | paste -sd';')
embed "$real"
echo "ok: gaps and duplicates refused; the $(ls "$src"/db/migrations/*.sql | wc -l) real migrations embed"
