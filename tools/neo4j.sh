#!/usr/bin/env bash
# Start or stop a throwaway local Neo4j 5.26 Community server on loopback.
#
#   tools/neo4j.sh start   # idempotent; prints bolt://127.0.0.1:PORT as its last line
#   tools/neo4j.sh stop    # stops it and deletes its data
#   tools/neo4j.sh fetch   # only fetches the jars and builds the launcher (once), so that
#                          # several servers can then start at the same time
#
# NEO4J_STATE (default .cache/neo4j/dev) holds one server's pid, URI, data and log, so
# `make test` runs its own server beside a developer's `make neo4j-start` one.
# NEO4J_HEAP (default 1g) is the JVM heap: enough for tests and 100k messages; give a
# million-message benchmark 4g.
# NEO4J_PAGECACHE (default 512m) caches the store files: about 5 MB per thousand
# messages with their vectors (100k: 0.5g), so searches stay off the disk when it holds
# them; give a million-message benchmark 6g.
# NEO4J_GC (default -XX:+UseSerialGC) is the JVM's collector: the serial one suits the
# small heaps of tests on two cores; a 4g heap under it pauses for long enough to show
# in search tails, so give a million-message benchmark -XX:+UseG1GC.
# The jars come from Maven Central once and stay in .cache/neo4j/lib (and ~/.m2).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache/neo4j"
state="${NEO4J_STATE:-$cache/dev}"
case "$state" in /*) ;; *) state="$root/$state" ;; esac
lib="$cache/lib"
classes="$cache/classes"

ensure_java() {
    # The polyglot machines ship Java 17 and Maven; elsewhere install them from Debian.
    if ! command -v javac >/dev/null 2>&1 || ! command -v mvn >/dev/null 2>&1; then
        echo "installing Java 17 and Maven (once)..." >&2
        apt-get update -qq >&2 && apt-get install -y -qq openjdk-17-jdk-headless maven >&2
    fi
}

fetch() {
    ensure_java
    if [ ! -f "$lib/.complete" ]; then
        echo "fetching Neo4j 5.26 from Maven Central (once)..." >&2
        rm -rf "$lib"
        mvn -q -B -f "$root/tools/neo4j/pom.xml" dependency:copy-dependencies \
            -DoutputDirectory="$lib" -DincludeScope=runtime >&2
        touch "$lib/.complete"
    fi
    if [ ! -f "$classes/Launcher.class" ] || [ "$root/tools/neo4j/Launcher.java" -nt "$classes/Launcher.class" ]; then
        mkdir -p "$classes"
        javac -d "$classes" -cp "$lib/*" "$root/tools/neo4j/Launcher.java"
    fi
}

running() {
    [ -f "$state/pid" ] && kill -0 "$(cat "$state/pid")" 2>/dev/null
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

bolt_answers() {
    python3 - "$1" <<'PY'
import socket, sys
try:
    with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1) as s:
        s.sendall(b"\x60\x60\xb0\x17" + b"\x00\x00\x04\x04" + b"\x00" * 12)
        sys.exit(0 if len(s.recv(4)) == 4 else 1)
except OSError:
    sys.exit(1)
PY
}

start() {
    if running; then
        cat "$state/uri"
        return
    fi
    fetch
    rm -rf "$state"
    mkdir -p "$state"
    port=$(free_port)
    nohup java -Xms256m "-Xmx${NEO4J_HEAP:-1g}" "${NEO4J_GC:--XX:+UseSerialGC}" \
        -cp "$lib/*:$classes" Launcher "$state/home" "$port" "${NEO4J_PAGECACHE:-512m}" >"$state/log" 2>&1 &
    echo $! >"$state/pid"
    for _ in $(seq 1 240); do
        if bolt_answers "$port"; then
            echo "bolt://127.0.0.1:$port" >"$state/uri"
            echo "Neo4j 5.26 is up (log: $state/log)" >&2
            cat "$state/uri"
            return
        fi
        if ! running; then
            echo "Neo4j failed to start; its log follows:" >&2
            tail -n 30 "$state/log" >&2
            exit 1
        fi
        sleep 0.5
    done
    echo "Neo4j did not answer on Bolt within 120 s; see $state/log" >&2
    exit 1
}

stop() {
    if running; then
        pid=$(cat "$state/pid")
        kill "$pid"
        for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
        kill -9 "$pid" 2>/dev/null || true
    fi
    rm -rf "$state"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    fetch) fetch ;;
    *) echo "usage: tools/neo4j.sh start|stop|fetch" >&2; exit 2 ;;
esac
