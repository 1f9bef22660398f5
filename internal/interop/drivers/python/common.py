"""The event lines every driver of the fail-over matrix prints (package
interop's Event): one JSON object a line on stdout, flushed at once."""
import json
import sys
import time


def emit(ev, partitions=(), msg=None):
    line = {"t": time.time() * 1000.0, "ev": ev, "partitions": sorted(partitions)}
    if msg:
        line["msg"] = msg
    sys.stdout.write(json.dumps(line) + "\n")
    sys.stdout.flush()
