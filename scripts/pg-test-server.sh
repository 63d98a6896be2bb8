# Sourced by .ci/run: start a throwaway PostgreSQL 15 server for the
# PostgresSessionStore tests (issue 13) and export its URL as
# DSH_TEST_PG_URL; it is stopped and removed when the sourcing shell exits.
# The server runs as the `postgres` user (initdb refuses root), listens on
# 127.0.0.1 at a free port and keeps its socket in its own directory.
pg_bin=${DSH_PG_BIN:-/usr/lib/postgresql/15/bin}
pg_dir=$(mktemp -d /tmp/dsh-pg.XXXXXX)
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres "$pg_dir"
pg_port=$(node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})")
as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-sync >"$pg_dir/initdb.log" 2>&1 \
  || { cat "$pg_dir/initdb.log"; exit 1; }
# fsync off: the tests kill clients, never the server.
as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
  -o "-h 127.0.0.1 -p $pg_port -k $pg_dir -c fsync=off -c max_connections=200" start >/dev/null \
  || { cat "$pg_dir/server.log"; exit 1; }
stop_pg_test_server() {
  as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$pg_dir"
}
trap stop_pg_test_server EXIT
export DSH_TEST_PG_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
echo "PostgreSQL test server at $DSH_TEST_PG_URL"
