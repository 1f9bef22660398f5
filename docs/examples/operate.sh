#!/usr/bin/env bash
# operate: three `tenure worker`s share the 64 partitions of a group, and
# an operator asks what the README's "Operating a live group" section
# asks: who owns what, why the group last rebalanced (explain), what
# removing a worker would move and cost (what-if), and then moves its work
# away gracefully (drain), which the generation log records.
#
# It starts its own coordinator on 127.0.0.1:9092 with its status page and
# admin API on 127.0.0.1:9644 (TENURE_LISTEN, TENURE_BROKERS, TENURE_HTTP
# and TENURE_ADMIN change them), with its data in operate-data, which its
# last command removes once it has stopped what it started. The workers
# append their records to the coordinator's own etcd: nothing but
# bin/tenure is needed. The topic has 60 partitions, so that three workers
# hold 20 each whatever their member IDs: the figures are the same in
# every run but for the times. It takes about 15 seconds.
#
# readme: live
# readme: mask \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+ UTC
# readme: mask (?:^|[\s(])([A-Za-z0-9_-]{22})(?:$|[\s)])
# readme: mask work\[(\d+)\]
# readme: mask work:([\d,-]+)
# readme: mask (?m)^work +(\d+) 
# readme: mask in ([\d.]+m?s): 
# readme: mask unowned ([\d.]+) partition-s in all, at most ([\d.]+m?s)
. "$(dirname "$0")/lib.sh"

scratch_dir

# joined N waits until the group has N members and is Stable.
joined() {
	wait_until "bin/tenure groups describe demo | grep -qE '^MEMBERS +$1\$'"
	wait_until 'bin/tenure groups describe demo | grep -qE "^STATE +Stable"'
}

start coordinator 'bin/tenure serve --data-dir operate-data --topic work:60'
wait_for coordinator.log 'serving'
start worker-1 'bin/tenure worker --group demo --instance-id worker-1'
joined 1
start worker-2 'bin/tenure worker --group demo --instance-id worker-2'
joined 2
start worker-3 'bin/tenure worker --group demo --instance-id worker-3'
joined 3
run 'bin/tenure groups describe demo'
run 'bin/tenure groups explain demo --limit 1'
run 'bin/tenure groups what-if demo --remove worker-3'
run 'bin/tenure groups drain demo worker-3'
run 'bin/tenure groups describe demo'
run 'kill %2 %3 %4; wait %2 %3 %4; kill %1; wait; rm -rf operate-data'
