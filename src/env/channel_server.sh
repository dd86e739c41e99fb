# onebash's server inside a container (src/env/channel.rs): started once
# per container by `ENGINE exec -i`, it runs the commands onebash sends on
# its stdin, one request a line, each as a fresh `bash -c`, so that a
# command costs a fork and an exec instead of an engine's exec. bash alone:
# images need not have more than bash (and `sleep`, which only the rounds
# of the sweep use).
#
# A request is one line of bash assignments, every value quoted by onebash
# as $'...' with each byte that is not plainly safe written \xHH:
#   __ob_n  the request's nonce, which starts the lines the server prints
#   __ob_m  the command's mark (ONEBASH_COMMAND's value)
#   __ob_f  the file-size limit in blocks of 1 KiB (`ulimit -f`)
#   __ob_w  the working directory
#   __ob_e  an array of NAME=VALUE, exported for the command
#   __ob_s  the script
# For each, the server prints "NONCE start" on a line, then the command's
# stdout and stderr as the command writes them, then "NONCE end STATUS".
# What the command leaves running that carries its mark, and every process
# that holds one of the server's own pipes, is killed before the end line:
# nothing of a command can write into the next one's output or read the
# next request. $1 is a nonce for the "ready" line.

# What the image's shell start-up (BASH_ENV) may have set does not stop
# the server: no exit on a failing command, no traps, no aliases, and the
# builtins it uses are the builtins (functions of the same names are
# unset). Each command's own bash reads BASH_ENV again, as before.
set +e +u +o pipefail +o errtrace +o functrace 2>/dev/null
trap - ERR EXIT DEBUG RETURN 2>/dev/null
shopt -u expand_aliases 2>/dev/null
unset -f builtin printf read eval export exec ulimit cd wait kill sleep set \
    declare unset trap shopt 2>/dev/null
# Nothing of the server's own reaches a command: its variables are not
# exported (even if the image's environment named one of them).
declare +x __ob_n __ob_m __ob_f __ob_w __ob_e __ob_s __ob_request __ob_pid \
    __ob_status __ob_round __ob_found __ob_dir __ob_pid2 __ob_var __ob_fd \
    __ob_kill __ob_oldpwd_set __ob_pipes __ob_pipe __ob_empty 2>/dev/null
# Each command in a process group of its own (job control), so that a
# command's `kill 0` reaches its own processes, not the server.
set -m
[ "${OLDPWD+set}" = set ] && __ob_oldpwd_set=1
# The server's own pipes (or sockets) to onebash: a process that holds one
# of them after its command ended could write into the next command's
# output or read the next request. Only pipes: another process's /dev/null
# is not the server's. Each is compared through a copy on descriptor 7, 8
# or 9, which no redirection of the sweep's own moves (inside its loops
# the server's stderr is /dev/null) and no command inherits.
__ob_pipes=()
for __ob_fd in 0 1 2; do
    if [ -p "/proc/$$/fd/$__ob_fd" ] || [ -S "/proc/$$/fd/$__ob_fd" ]; then
        eval "exec $((__ob_fd + 7))>&$__ob_fd"
        __ob_pipes+=("/proc/$$/fd/$((__ob_fd + 7))")
    fi
done

# Kills the command's process group (every process that stayed in it, in
# one call), then, in rounds until two in a row find none, every process
# with the command's mark and every one holding one of the server's pipes
# on a descriptor from 0 to 9 (where an inherited one is; checking every
# descriptor of a process holding thousands cost a third of a second).
__ob_sweep() {
    __ob_empty=0
    for __ob_round in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
        kill -KILL -- "-$__ob_pid" 2>/dev/null
        __ob_found=0
        for __ob_dir in /proc/[0-9]*; do
            __ob_pid2=${__ob_dir#/proc/}
            [ "$__ob_pid2" = "$$" ] || [ "$__ob_pid2" = 1 ] && continue
            __ob_kill=0
            while IFS= read -r -d '' __ob_var; do
                if [ "$__ob_var" = "ONEBASH_COMMAND=$__ob_m" ]; then __ob_kill=1; break; fi
            done 2>/dev/null <"$__ob_dir/environ"
            if [ "$__ob_kill" = 0 ] && [ "${#__ob_pipes[@]}" -gt 0 ]; then
                for __ob_fd in "$__ob_dir"/fd/[0-9]; do
                    for __ob_pipe in "${__ob_pipes[@]}"; do
                        [ "$__ob_fd" -ef "$__ob_pipe" ] && __ob_kill=1 && break
                    done
                    [ "$__ob_kill" = 1 ] && break
                done 2>/dev/null
            fi
            if [ "$__ob_kill" = 1 ]; then
                kill -KILL "$__ob_pid2" 2>/dev/null && __ob_found=1
            fi
        done
        if [ "$__ob_found" = 0 ]; then
            __ob_empty=$((__ob_empty + 1))
            [ "$__ob_empty" = 2 ] && break
        else
            __ob_empty=0
            sleep 0.05 2>/dev/null
        fi
    done
}

printf '%s ready\n' "$1"
while IFS= read -r __ob_request; do
    __ob_n='' __ob_m='' __ob_f='' __ob_w='' __ob_s='' __ob_e=()
    eval "$__ob_request"
    if [ -z "$__ob_n" ] || [ -z "$__ob_m" ]; then
        printf 'onebash: a request the server cannot read\n' >&2
        exit 2
    fi
    printf '%s start\n' "$__ob_n"
    (
        if [ "$PWD" != "$__ob_w" ]; then
            cd -- "$__ob_w" || exit 126
            [ "$__ob_oldpwd_set" = 1 ] || unset OLDPWD
        fi
        for __ob_var in "${__ob_e[@]}"; do
            export "$__ob_var"
        done
        exec 7>&- 8>&- 9>&-
        export "ONEBASH_COMMAND=$__ob_m"
        ulimit -f "$__ob_f" 2>/dev/null
        exec bash -c "$__ob_s"
    ) </dev/null 2>&1 &
    __ob_pid=$!
    # (Without job control's "Done" line on the server's stderr.)
    { wait "$__ob_pid"; } 2>/dev/null
    __ob_status=$?
    __ob_sweep
    printf '%s end %s\n' "$__ob_n" "$__ob_status"
done
