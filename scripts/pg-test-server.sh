# Sourced by .ci/run: start a throwaway PostgreSQL 15 server for the
# PostgresSessionStore tests (issue 13) and export its URL as
# DSH_TEST_PG_URL; and, where pgbouncer is installed (.ci/run installs it),
# a PgBouncer in transaction mode in front of it, as DSH_TEST_PGBOUNCER_URL
# (issue 19). Both are stopped and removed when the sourcing shell exits.
# The server runs as the `postgres` user (initdb refuses root, and so does
# pgbouncer), listens on 127.0.0.1 at a free port and keeps its socket in
# its own directory.
pg_bin=${DSH_PG_BIN:-/usr/lib/postgresql/15/bin}
pg_dir=$(mktemp -d /tmp/dsh-pg.XXXXXX)
# From /, which postgres can enter even when the checkout is a private
# (0700) folder (the paths given are absolute).
as_pg() {
  if [ "$(id -u)" = 0 ]; then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}
[ "$(id -u)" = 0 ] && chown postgres "$pg_dir"
free_port() {
  node -e "const s=require('net').createServer();s.listen(0,'127.0.0.1',()=>{console.log(s.address().port);s.close()})"
}
pg_port=$(free_port)
as_pg "$pg_bin/initdb" -D "$pg_dir/data" -U postgres -A trust --no-sync >"$pg_dir/initdb.log" 2>&1 \
  || { cat "$pg_dir/initdb.log"; exit 1; }
# fsync off: the tests kill clients, never the server.
as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -l "$pg_dir/server.log" -w -t 60 \
  -o "-h 127.0.0.1 -p $pg_port -k $pg_dir -c fsync=off -c max_connections=200" start >/dev/null \
  || { cat "$pg_dir/server.log"; exit 1; }
stop_pg_test_server() {
  if [ -f "$pg_dir/pgbouncer.pid" ]; then kill "$(cat "$pg_dir/pgbouncer.pid")" 2>/dev/null || true; fi
  as_pg "$pg_bin/pg_ctl" -D "$pg_dir/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$pg_dir"
}
trap stop_pg_test_server EXIT
export DSH_TEST_PG_URL="postgres://postgres@127.0.0.1:$pg_port/postgres"
echo "PostgreSQL test server at $DSH_TEST_PG_URL"

pgbouncer_bin=${DSH_PGBOUNCER_BIN:-$(command -v pgbouncer || echo /usr/sbin/pgbouncer)}
if [ -x "$pgbouncer_bin" ]; then
  bouncer_port=$(free_port)
  # Transaction pooling: a server connection belongs to a client for one
  # transaction only (no session state survives between them).
  cat >"$pg_dir/pgbouncer.ini" <<EOF
[databases]
postgres = host=127.0.0.1 port=$pg_port dbname=postgres
[pgbouncer]
listen_addr = 127.0.0.1
listen_port = $bouncer_port
unix_socket_dir = $pg_dir
auth_type = trust
auth_file = $pg_dir/userlist.txt
pool_mode = transaction
default_pool_size = 40
max_client_conn = 2000
logfile = $pg_dir/pgbouncer.log
pidfile = $pg_dir/pgbouncer.pid
EOF
  echo '"postgres" ""' >"$pg_dir/userlist.txt"
  [ "$(id -u)" = 0 ] && chown postgres "$pg_dir/pgbouncer.ini" "$pg_dir/userlist.txt"
  as_pg "$pgbouncer_bin" -d -q "$pg_dir/pgbouncer.ini" || { cat "$pg_dir/pgbouncer.log"; exit 1; }
  for _ in $(seq 1 100); do
    (echo >"/dev/tcp/127.0.0.1/$bouncer_port") 2>/dev/null && break
    sleep 0.1
  done
  export DSH_TEST_PGBOUNCER_URL="postgres://postgres@127.0.0.1:$bouncer_port/postgres"
  echo "PgBouncer (transaction mode) at $DSH_TEST_PGBOUNCER_URL"
else
  echo "pgbouncer is not installed: the tests through PgBouncer are skipped"
fi
