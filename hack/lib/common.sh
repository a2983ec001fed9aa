# Helpers every part of hack/local-cluster.sh uses: its messages, free ports, and the processes it
# starts (pidfiles whose process must still name DIR on its command line, stopping them).
# shellcheck shell=bash

die() { echo "local-cluster: $*" >&2; exit 1; }
log() { echo "local-cluster: $*" >&2; }

# DIR's state files (ports, mode.env, components.env, nodes.env, nodes/<name>/node.env) hold the
# KEY=VALUE lines this script writes, a value with spaces in double quotes: each KEY becomes a variable.
load_env() { # file
  local key value
  while IFS='=' read -r key value || [ -n "$key" ]; do
    [[ $key =~ ^[A-Z_][A-Z0-9_]*$ ]] || continue
    value=${value#\"} value=${value%\"}
    printf -v "$key" '%s' "$value"
  done <"$1"
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

running() { # pid: the process exists and is not a zombie (an exited child of ours waits for init to reap it)
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

pid_alive() { # pidfile dir: the pid is alive and its command line mentions DIR
  local pidfile=$1 dir=$2 pid
  [ -f "$pidfile" ] || return 1
  pid=$(cat "$pidfile")
  [ -n "$pid" ] && [ -r "/proc/$pid/cmdline" ] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$dir"
}

stop_pidfile() {
  local pidfile=$1 dir=$2 pid
  if pid_alive "$pidfile" "$dir"; then
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do
      running "$pid" || break
      sleep 0.1
    done
    if running "$pid"; then
      kill -KILL "$pid" 2>/dev/null || true
      for _ in $(seq 1 50); do  # until it is gone: a restart must find its port free
        running "$pid" || break
        sleep 0.1
      done
    fi
  fi
  rm -f "$pidfile"
}

kill_pidfile() { # pidfile dir signal: signal a recorded process and wait (up to 10 s) for it to exit
  local pidfile=$1 dir=$2 sig=$3 pid
  pid_alive "$pidfile" "$dir" || { rm -f "$pidfile"; return 0; }
  pid=$(cat "$pidfile")
  kill "-$sig" "$pid" 2>/dev/null || true
  for _ in $(seq 1 100); do
    running "$pid" || break
    sleep 0.1
  done
  if running "$pid"; then kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$pidfile"
}
