#!/usr/bin/env bash
# The test suite on pytest-xdist workers, each against a Neo4j 5 of its own (what `make test` runs).
#
#   tools/test.sh WORKERS PYTHON [PYTEST ARGS...]
#
# Every Neo4j test empties the one database of its server (Community has one), so two
# workers on one server would wipe each other's data: worker gwN gets the server
# NEO4J_STATE=.cache/neo4j/test-gwN, named in NEO4J_TEST_URI_gwN (read by
# tests/support/stores.py). The servers start at the same time, after the jars are
# fetched once, and are all stopped at the end, whatever the outcome. WORKERS 0 runs
# without xdist, on one server named in NEO4J_TEST_URI.
set -euo pipefail
cd "$(dirname "$0")/.."
workers=$1
python=$2
shift 2
servers=$((workers > 0 ? workers : 1))
state() { echo ".cache/neo4j/test-gw$1"; }

stop_all() {
    for ((i = 0; i < servers; i++)); do NEO4J_STATE=$(state "$i") tools/neo4j.sh stop & done
    wait
}
trap stop_all EXIT

tools/neo4j.sh fetch
pids=()
for ((i = 0; i < servers; i++)); do
    NEO4J_STATE=$(state "$i") tools/neo4j.sh start >/dev/null &
    pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid"; done
for ((i = 0; i < servers; i++)); do export "NEO4J_TEST_URI_gw$i=$(cat "$(state "$i")/uri")"; done
export NEO4J_TEST_URI=$NEO4J_TEST_URI_gw0

if ((workers > 0)); then
    # loadscope: a module's tests stay on one worker, so a module-scoped fixture (the
    # wheel test_packaging.py builds in the source tree, say) is built once.
    "$python" -m pytest -n "$workers" --dist loadscope "$@"
else
    "$python" -m pytest "$@"
fi
