"""kafka-python (Debian's python3-kafka) driver of the fail-over matrix: a
classic consumer of one topic in a group, printing its rebalance listener's
calls as JSON lines until SIGTERM. Usage: kafka_python_driver.py BROKERS
GROUP TOPIC. kafka-python has no lost callback: a session it loses shows
as a revoke of everything before it joins again. The client settings are
docs/FAILOVER.md's."""
import logging
import signal
import sys

from kafka import ConsumerRebalanceListener, KafkaConsumer

from common import emit

brokers, group, topic = sys.argv[1:4]
logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


class Listener(ConsumerRebalanceListener):
    def on_partitions_revoked(self, revoked):
        emit("revoked", [tp.partition for tp in revoked])

    def on_partitions_assigned(self, assigned):
        emit("assigned", [tp.partition for tp in assigned])


consumer = KafkaConsumer(
    bootstrap_servers=brokers.split(","),
    group_id=group,
    enable_auto_commit=False,
    session_timeout_ms=10000,
    heartbeat_interval_ms=1000,
    fetch_max_wait_ms=1000,
    api_version_auto_timeout_ms=10000,
)
consumer.subscribe([topic], listener=Listener())
emit("started")
while not stop:
    consumer.poll(timeout_ms=200)
emit("stopping")
consumer.close()
