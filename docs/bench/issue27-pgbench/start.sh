set -e
pg_dir=/tmp/pgx/db; rm -rf $pg_dir; mkdir -p $pg_dir; chown postgres $pg_dir
runuser -u postgres -- initdb -D $pg_dir/data -U stipend --auth=trust -E UTF8 >/dev/null
runuser -u postgres -- pg_ctl -D $pg_dir/data -l $pg_dir/log -w -o "-c listen_addresses=127.0.0.1 -p 55432 -k $pg_dir" start >/dev/null
