#!/usr/bin/env bash
# worker-pause: two `tenure worker`s share the 64 partitions of a group and
# append numbered records to the coordinator's own etcd through a fence.
# The second freezes for 10 s, longer than the 6 s session: the
# coordinator expels it while it lives and the first worker takes its
# partitions under a newer token. When it wakes, the writes it had decided
# on go out under its old token and the fence refuses them; it rejoins and
# takes partitions back. `tenure worker --records` then shows records
# written twice (at least once) and none accepted after a newer token
# (fencing). Nothing but bin/tenure is needed.
#
# It starts its own coordinator on 127.0.0.1:9092 with its admin API on
# 127.0.0.1:9644 (TENURE_LISTEN, TENURE_BROKERS, TENURE_HTTP and
# TENURE_ADMIN change them), with its data in pause-data, and its last
# command stops what it started and removes that directory, so that the
# next demo starts afresh. It takes about 20 seconds.
#
# For internal/readme, which compares a run with the README: the output
# varies between runs (live) in what the masks match.
# readme: live
# readme: mask \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z
# readme: mask (?m)^([A-Za-z0-9_-]{22})\s
# readme: mask "member": "([^"]+)"
# readme: mask "(?:partition|seq|offset|written|held_writes)": (\d+)
# readme: mask (?m)^3 +\d+ +([1-9]\d*) 
# readme: mask (?m)^\d +(\d+) 
. "$(dirname "$0")/lib.sh"

scratch_dir
start coordinator 'bin/tenure serve --data-dir pause-data --consumer-session-timeout 6s'
wait_for coordinator.log 'serving'
start worker-1 'bin/tenure worker --group demo --session-timeout 6s'
wait_for worker-1.log 'claim started' 64
start worker-2 'bin/tenure worker --group demo --session-timeout 6s --pause-after 5s --pause-for 10s'
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
wait_until 'bin/tenure worker --group demo --records | grep -q "^4 "'
run 'bin/tenure worker --group demo --records'
run 'kill %2 %3; wait %2 %3; kill %1; wait; rm -rf pause-data'
