"""librdkafka (Debian's python3-confluent-kafka) driver of the fail-over
matrix: a classic consumer of one topic in a group, printing its rebalance
callbacks as JSON lines until SIGTERM. Usage: rdkafka_driver.py BROKERS
GROUP TOPIC. The client settings are docs/FAILOVER.md's."""
import signal
import sys

from confluent_kafka import Consumer

from common import emit

brokers, group, topic = sys.argv[1:4]
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def parts(ps):
    return [p.partition for p in ps]


consumer = Consumer({
    "bootstrap.servers": brokers,
    "group.id": group,
    "enable.auto.commit": False,
    "session.timeout.ms": 10000,
    "heartbeat.interval.ms": 1000,
    "fetch.wait.max.ms": 1000,
    # librdkafka asks FindCoordinator again only every
    # coordinator.query.interval.ms (10 min) while its coordinator's
    # connection is up, and a frozen coordinator's stays up: the answer
    # naming the new coordinator is what closes that connection and fails
    # the hung heartbeat, and it must come within session.timeout.ms of
    # the last good heartbeat, or the client's own session timer revokes
    # everything (docs/FAILOVER.md, librdkafka).
    "coordinator.query.interval.ms": 1000,
    "log_level": 4,
})
consumer.subscribe([topic],
                   on_assign=lambda c, ps: emit("assigned", parts(ps)),
                   on_revoke=lambda c, ps: emit("revoked", parts(ps)),
                   on_lost=lambda c, ps: emit("lost", parts(ps)))
emit("started")
while not stop:
    msg = consumer.poll(0.2)
    if msg is not None and msg.error():
        emit("error", msg=str(msg.error()))
emit("stopping")
consumer.close()
