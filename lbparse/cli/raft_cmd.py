"""placeholder"""
NAME = "raft"
HELP = "read the metadata Raft log and stable store in a node's raft/raft.db"
def add_arguments(p): pass
def run(args): return 2
