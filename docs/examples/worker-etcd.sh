#!/usr/bin/env bash
# worker-etcd: `tenure worker` on its defaults beside `tenure serve` on its
# defaults, as `make run` starts it: the coordinator keeps its state in an
# embedded etcd on a port the kernel chooses, and the worker, given no
# --etcd-endpoints, asks the coordinator's admin API for that etcd and
# appends its fenced records there. Nothing else is needed: no PostgreSQL,
# no etcd of your own.
#
# It starts its own coordinator on 127.0.0.1:9092 with its admin API on
# 127.0.0.1:9644 (TENURE_LISTEN, TENURE_BROKERS, TENURE_HTTP and
# TENURE_ADMIN change them), with its data in tenure-data as make run's,
# and its last command stops the worker, then the coordinator. It takes a
# few seconds.
#
# readme: live
# readme: mask \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+Z
# readme: mask (?:^|[\s(])([A-Za-z0-9_-]{22})(?:$|[\s)"])
# readme: mask http://127\.0\.0\.1:(\d+)
# readme: mask work:([\d,-]+)
# readme: mask (?m)^([A-Za-z0-9_-]{22}) 
# readme: mask "offset": (\d+)
. "$(dirname "$0")/lib.sh"

scratch_dir
start coordinator 'bin/tenure serve --data-dir tenure-data'
wait_for coordinator.log 'serving'
start worker 'bin/tenure worker --group demo'
wait_for worker.log 'claim started' 64
wait_until 'bin/tenure groups describe demo | grep -qE "^STATE +Stable"'
run "grep -m1 \"the coordinator's etcd\" worker.log"
run 'bin/tenure groups describe demo'
run 'kill %2; wait %2; kill %1; wait'
