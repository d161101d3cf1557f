"""How Vicar runs: the connection to Temporal and the payload codec, the embedded dev
server and its keeper, the worker's shards and the claims on them, the locks on a data
directory, the ports the servers take, the operational HTTP surface, log redaction, the
workflow sandbox's bytecode, tasks whose failure is always read, and how a process ends.
Nothing here reasons about a gate."""
