#!/usr/bin/env bash
# operate: three `tenure worker`s share the 64 partitions of a group, and
# an operator asks what the README's "Operating a live group" section
# asks: who owns what, why the group last rebalanced (explain), what
# removing a worker would move and cost (what-if), and then moves its work
# away gracefully (drain), which the generation log records.
#
# It starts its own coordinator on 127.0.0.1:9092 with its status page and
# admin API on 127.0.0.1:9644 (TENURE_LISTEN, TENURE_BROKERS, TENURE_HTTP
# and TENURE_ADMIN change them), and needs a PostgreSQL server, as
# worker-pause.sh does. The topic has 60 partitions, so that three workers
# hold 20 each whatever their member IDs: the figures are the same in
# every run but for the times. It takes about 15 seconds.
#
# readme: live
# readme: needs postgres
# readme: mask \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ UTC
# readme: mask (?:^|[\s(])([A-Za-z0-9_-]{22})(?:$|[\s)])
# readme: mask work\[(\d+)\]
# readme: mask work:([\d,-]+)
# readme: mask (?m)^work +(\d+) 
# readme: mask in ([\d.]+m?s): 
# readme: mask unowned ([\d.]+) partition-s in all, at most ([\d.]+m?s)
. "$(dirname "$0")/lib.sh"

scratch_dir
# The reader's DSN: TENURE_TEST_POSTGRES, which `. .ci/postgres.sh &&
# start_postgres` exports, or .ci/postgres.sh's default address.
run 'DSN=${TENURE_TEST_POSTGRES:-postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable} TABLE=operate_demo_$$'
at_exit 'psql "$DSN" -c "DROP TABLE IF EXISTS $TABLE, ${TABLE}_tokens"'

# joined N waits until the group has N members and is Stable.
joined() {
	wait_until "bin/tenure groups describe demo | grep -qE '^MEMBERS +$1\$'"
	wait_until 'bin/tenure groups describe demo | grep -qE "^STATE +Stable"'
}

start coordinator 'bin/tenure serve --store memory --topic work:60'
wait_for coordinator.log 'serving'
start worker-1 'bin/tenure worker --group demo --instance-id worker-1 --resource postgres \
    --postgres-dsn "$DSN" --postgres-table "$TABLE"'
joined 1
start worker-2 'bin/tenure worker --group demo --instance-id worker-2 --resource postgres \
    --postgres-dsn "$DSN" --postgres-table "$TABLE"'
joined 2
start worker-3 'bin/tenure worker --group demo --instance-id worker-3 --resource postgres \
    --postgres-dsn "$DSN" --postgres-table "$TABLE"'
joined 3
run 'bin/tenure groups describe demo'
run 'bin/tenure groups explain demo --limit 1'
run 'bin/tenure groups what-if demo --remove worker-3'
run 'bin/tenure groups drain demo worker-3'
run 'bin/tenure groups describe demo'
