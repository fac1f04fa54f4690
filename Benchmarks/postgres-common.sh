# What the benchmarks that start a PostgreSQL of their own share (Benchmarks/fleet.sh, queue.sh, campaign-done.sh),
# sourced: the script sets `work` (its throwaway folder) and `cleanup` (an array of commands its exit runs) first.

# The path of one of PostgreSQL's programs: Debian keeps initdb and pg_ctl in /usr/lib/postgresql/VERSION/bin, off PATH.
pg_bin() { command -v "$1" 2>/dev/null || find /usr/lib/postgresql -path "*/bin/$1" 2>/dev/null | sort -V | tail -1; }

# start_postgres NAME [SERVER OPTION...]: a throwaway cluster in $work/pg on a free loopback port, its user `salvo`
# with a random password (scram-sha-256 over TCP; the password also in $work/pg/pwfile), started with the server
# options given, and its stop added to `cleanup`. As root the cluster runs as the `postgres` user. Sets pgport and
# pgpassword.
start_postgres() {
    local name=$1
    shift
    mkdir "$work/pg" "$work/pg/sockets"
    pgpassword="$name-$(od -An -N8 -tx8 /dev/urandom | tr -d ' ')"
    printf '%s\n' "$pgpassword" >"$work/pg/pwfile"
    chmod 600 "$work/pg/pwfile"
    local as=()
    if [ "$(id -u)" = 0 ]; then
        chown -R postgres:postgres "$work/pg"
        # The work folder is root's (mktemp: 0700): the cluster's owner needs to pass through it to its own.
        chmod 711 "$work"
        as=(runuser -u postgres --)
    fi
    "${as[@]}" "$(pg_bin initdb)" -D "$work/pg/data" -U salvo --pwfile "$work/pg/pwfile" --auth-host scram-sha-256 \
        --auth-local trust -E UTF8 --no-sync >/dev/null
    pgport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    # The server outlives the command that starts it: it gets none of this script's descriptors beyond the standard
    # three (a `flock` on the machine's lock, held on such a descriptor, would be held as long as the server runs).
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi
        done
        exec "${as[@]}" "$(pg_bin pg_ctl)" -D "$work/pg/data" -l "$work/pg/log" -w -t 60 start \
            -o "-p $pgport -k $work/pg/sockets -c listen_addresses=127.0.0.1 $*" >/dev/null
    )
    cleanup+=("${as[*]} $(pg_bin pg_ctl) -D $work/pg/data -m fast -w -t 30 stop")
}
