"""Splits pgbench's per-second progress (--progress-timestamp) by the trigger variant that held
the whole second, and prints each variant's median and the ratio B / A."""
import re
import statistics
import sys

switches_file, progress_file, a, b = sys.argv[1:5]
switches = [(float(t), v) for t, v in (line.split() for line in open(switches_file))]
by_variant = {a: [], b: []}
for line in open(progress_file):
    m = re.match(r"progress: ([0-9.]+) s, ([0-9.]+) tps", line)
    if not m:
        continue
    end, tps = float(m.group(1)), float(m.group(2))
    began = [(t, v) for t, v in switches if t <= end]
    # Keep the second (end - 1, end] only if no switch fell inside it.
    if began and began[-1][0] + 0.05 <= end - 1:
        by_variant[began[-1][1]].append(tps)
for v in (a, b):
    print(f"{v}: {len(by_variant[v])} seconds, median {statistics.median(by_variant[v]):.0f} tx/s")
ratio = statistics.median(by_variant[b]) / statistics.median(by_variant[a])
print(f"{b} / {a}: {ratio:.3f}")
