"""Liftbridge streams read live, by offset, through a node's gRPC API.

    from lbparse.streams.client import StreamsClient
    with StreamsClient(["127.0.0.1:9292"]) as client:
        for part in client.partitions(["orders"]):
            for msg in client.read(part.stream, part.partition, 0, part.end):
                ...  # api_pb2.Message

The client (client.py) needs the extra `streams` (grpcio); this package
itself imports nothing, so that `import lbparse.streams` works without it.
The Spark source `format("liftbridge-streams")` (lbparse.spark.streams_source)
reads through it.
"""
