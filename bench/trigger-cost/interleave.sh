#!/bin/bash
# One pgbench run of the finish loop (8 clients, 24 000 transactions each: 192 000 of the pool's
# 200 000) while the logging triggers are switched between two variants every SLICE seconds, so
# both see the same machine within seconds of each other. Prints each variant's median
# transactions per second over the whole seconds it alone held, and their ratio.
# Usage: bench/trigger-cost/interleave.sh A B [SLICE] [DATABASE]
#   variants: without (no lastword trigger), installed (migrations' triggers as shipped),
#   nodeath (installed but tasks_log_death), deathonly, before (BEFORE-trigger logging),
#   noop (AFTER triggers on runs that do nothing), unlogged (installed, logging into an UNLOGGED
#   copy of change_log), rule (installed, but the run's update logged by a rule, not a trigger)
set -euo pipefail
a=$1 b=$2 slice=${3:-3} db=${4:-lastword_trigger_cost}
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
export PATH=/usr/lib/postgresql/15/bin:$PATH
P=(psql -q -h 127.0.0.1 -U postgres -v ON_ERROR_STOP=1 -d "$db")
"${P[@]}" <<SQL
ALTER TABLE tasks DISABLE TRIGGER USER;
ALTER TABLE runs DISABLE TRIGGER USER;
ALTER TABLE runs DISABLE RULE runs_logr_update;
UPDATE tasks SET status = 'leased', owner = 'w', lease_epoch = 1, lease_expires_at = now() + interval '1 day', result = NULL WHERE id BETWEEN 100001 AND 300000;
UPDATE runs SET finished_at = NULL, output = NULL, completion_rows = NULL WHERE id BETWEEN 100001 AND 300000;
ALTER SEQUENCE finish_n RESTART WITH 1;
TRUNCATE change_log, change_log_unlogged;
SQL
"${P[@]}" -c "VACUUM ANALYZE tasks" -c "VACUUM ANALYZE runs" -c "CHECKPOINT"
triggers() {
  case $1 in
    without) echo "" ;;
    installed) echo "tasks_log_insert tasks_log_update tasks_log_death runs_log_insert runs_log_update runs_log_revival" ;;
    nodeath) echo "tasks_log_insert tasks_log_update runs_log_insert runs_log_update runs_log_revival" ;;
    deathonly) echo "tasks_log_death" ;;
    before) echo "tasks_logb_insert tasks_logb_update tasks_logb_death runs_logb_insert runs_logb_update runs_log_revival" ;;
    noop) echo "tasks_log_insert tasks_log_update tasks_log_death runs_noop_insert runs_noop_update" ;;
    unlogged) echo "tasks_log_insert tasks_log_update tasks_logu_death runs_log_insert runs_logu_update runs_log_revival" ;;
    rule) echo "tasks_log_insert tasks_log_update tasks_log_death runs_log_insert rule:runs_logr_update runs_log_revival" ;;
    *) echo "unknown variant $1" >&2; exit 2 ;;
  esac
}
triggers "$a" > /dev/null; triggers "$b" > /dev/null
pgbench -h 127.0.0.1 -U postgres -n -M prepared -c 8 -j 2 -t 24000 -P 1 --progress-timestamp \
  -f "$here/finish.sql" "$db" > "$out/summary" 2> "$out/progress" &
bench=$!
turn=0
while kill -0 $bench 2>/dev/null; do
  if [ $turn = 0 ]; then v=$a; else v=$b; fi
  # One transaction: every write sees one variant whole (ALTER TABLE waits for the writers).
  sql="BEGIN; ALTER TABLE tasks DISABLE TRIGGER USER; ALTER TABLE runs DISABLE TRIGGER USER;"
  sql="$sql ALTER TABLE runs DISABLE RULE runs_logr_update;"
  for t in $(triggers "$v"); do
    case $t in
      rule:*) t=${t#rule:}; sql="$sql ALTER TABLE ${t%%_*} ENABLE RULE $t;" ;;
      *) sql="$sql ALTER TABLE ${t%%_*} ENABLE TRIGGER $t;" ;;
    esac
  done
  "${P[@]}" -c "$sql COMMIT;" 2>/dev/null || true
  echo "$(date +%s.%N) $v" >> "$out/switches"
  turn=$((1 - turn))
  sleep "$slice"
done
wait $bench
"${P[@]}" -c "ALTER TABLE tasks DISABLE TRIGGER USER" -c "ALTER TABLE runs DISABLE TRIGGER USER" \
  -c "ALTER TABLE runs DISABLE RULE runs_logr_update"
python3 "$here/ratio.py" "$out/switches" "$out/progress" "$a" "$b"
grep '^tps' "$out/summary"
rm -rf "$out"
