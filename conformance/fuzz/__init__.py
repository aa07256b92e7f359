"""Frame-aware fuzzing of AMQP 0-9-1 servers (issue 12).

``sessions`` builds valid client sessions as frames, ``mutate`` edits them frame by frame,
``inproc`` feeds the results to the reference broker's sans-IO core (no sockets),
``wire`` sends them to any broker over TCP with a health check after each input, and
``cli`` is ``amqp-conformance fuzz``.  The fuzzer encodes its own frames (pamqp for
method payloads) and never imports the broker's codec, so a codec bug cannot hide itself.
"""
