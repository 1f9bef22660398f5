#!/usr/bin/env bash
# worker-pause: two `tenure worker`s share the 64 partitions of a group and
# append numbered records to a PostgreSQL table through its fence. The
# second freezes for 10 s, longer than the 6 s session: the coordinator
# expels it while it lives and the first worker takes its partitions under
# a newer token. When it wakes, the writes it had decided on go out under
# its old token and the fence refuses them; it rejoins and takes partitions
# back. The table then holds records written twice (at least once) and
# none accepted after a newer token (fencing).
#
# It starts its own coordinator on 127.0.0.1:9092 (TENURE_LISTEN and
# TENURE_BROKERS change that) and needs a PostgreSQL server:
# TENURE_TEST_POSTGRES (which `. .ci/postgres.sh && start_postgres` sets),
# or else .ci/postgres.sh's default address. The records go to a table of
# its own, dropped at the end: a coordinator that starts afresh starts its
# epochs at 1 again, and an older table's tokens would fence it. It takes
# about 20 seconds.
#
# For internal/readme, which compares a run with the README: the output
# varies between runs (live) in what the masks match.
# readme: live
# readme: needs postgres
# readme: mask \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z
# readme: mask (?m)^([A-Za-z0-9_-]{22})\s
# readme: mask "member": "([^"]+)"
# readme: mask "(?:partition|seq|offset|written|held_writes)": (\d+)
# readme: mask (?m)^ +\d \| +(\d+) \|
# readme: mask (?m)^ +\d \| +\S+ \| +([1-9]\d*) \|
. "$(dirname "$0")/lib.sh"

scratch_dir
# The reader's DSN: TENURE_TEST_POSTGRES, which `. .ci/postgres.sh &&
# start_postgres` exports, or .ci/postgres.sh's default address.
run 'DSN=${TENURE_TEST_POSTGRES:-postgres://tenure@127.0.0.1:55432/tenure_test?sslmode=disable} TABLE=pause_demo_$$'
at_exit 'psql "$DSN" -c "DROP TABLE IF EXISTS $TABLE, ${TABLE}_tokens"'

start coordinator 'bin/tenure serve --store memory --consumer-session-timeout 6s'
wait_for coordinator.log 'serving'
start worker-1 'bin/tenure worker --group demo --resource postgres --postgres-dsn "$DSN" \
    --postgres-table "$TABLE" --session-timeout 6s'
wait_for worker-1.log 'claim started' 64
start worker-2 'bin/tenure worker --group demo --resource postgres --postgres-dsn "$DSN" \
    --postgres-table "$TABLE" --session-timeout 6s --pause-after 5s --pause-for 10s'
wait_for worker-2.log 'claim started' 32
wait_until 'bin/tenure groups describe demo | grep -qE "^STATE +Stable"'
run 'bin/tenure groups describe demo'

wait_for worker-2.log 'claim started.*"token": 4' 32
wait_until 'bin/tenure groups describe demo | grep -qE "^STATE +Stable"'
run "grep -m1 'pause begins' worker-2.log"
run "grep -m1 'Owned.*Suspect' worker-2.log"
run "grep -m1 'member-expired' coordinator.log"
run "grep -m1 'claim started.*\"token\": 3' worker-1.log"
run "grep -m1 'pause ends' worker-2.log"
run "grep -m1 'write rejected' worker-2.log"
run "grep -c 'claim started.*\"token\": 4' worker-2.log"
run 'bin/tenure groups describe demo'
wait_until 'psql "$DSN" -Atc "SELECT count(*) FROM $TABLE WHERE token = 4" | grep -q "^[1-9]"'
run 'psql "$DSN" -c "
  SELECT token, count(*) AS records,
         count(*) FILTER (WHERE copy > 1) AS \"written again\",
         count(*) FILTER (WHERE token < newest) AS \"after a newer token\"
  FROM (SELECT token,
               count(*) OVER (PARTITION BY partition, seq ORDER BY id) AS copy,
               max(token) OVER (PARTITION BY partition ORDER BY id) AS newest
        FROM $TABLE) AS r
  GROUP BY token ORDER BY token"'
