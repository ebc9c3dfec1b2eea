#!/bin/sh
# waits (up to $1 s) until no other tightfit/cc1 runs and the 1-min load is below 0.5
end=$(( $(date +%s) + $1 ))
while [ $(date +%s) -lt $end ]; do
  busy=$(ps -eo pcpu,comm --no-headers | awk '$1 > 10' | wc -l)
  load=$(cut -d' ' -f1 /proc/loadavg)
  if [ "$busy" -eq 0 ] && [ "$(echo "$load < 0.5" | bc)" = 1 ]; then echo "quiet at $(date +%T), load $load"; exit 0; fi
  sleep 5
done
echo "not quiet after $1 s: load $(cut -d' ' -f1 /proc/loadavg)"; exit 1
