"""kafka-python (Debian's python3-kafka 2.0.2) SASL login of the interop
tests: joins GROUP on TOPIC over SASL_PLAINTEXT with MECHANISM as USER and
PASSWORD, and prints "joined" once it owns a partition, or "refused: ..."
when the client gives up, within TIMEOUT seconds. kafka-python 2.0 sends
SaslHandshake v0 and the exchange as raw tokens. Usage:
kafka_python_sasl.py BROKERS MECHANISM USER PASSWORD GROUP TOPIC TIMEOUT"""
import sys
import time

from kafka import KafkaConsumer

brokers, mechanism, user, password, group, topic, timeout = sys.argv[1:8]
deadline = time.time() + float(timeout)
try:
    consumer = KafkaConsumer(
        bootstrap_servers=brokers.split(","),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username=user,
        sasl_plain_password=password,
        group_id=group,
        enable_auto_commit=False,
        api_version_auto_timeout_ms=int(float(timeout) * 1000),
    )
    consumer.subscribe([topic])
    while time.time() < deadline:
        consumer.poll(timeout_ms=200)
        if consumer.assignment():
            print("joined", flush=True)
            consumer.close()
            sys.exit(0)
    print("refused: no partition within the timeout", flush=True)
except Exception as e:  # the client's refusal, whatever its class
    print("refused: %s: %s" % (type(e).__name__, e), flush=True)
sys.exit(1)
