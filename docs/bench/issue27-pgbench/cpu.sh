pgcpu() { local t=0; for p in $(pgrep -u postgres postgres); do read -r -a f < /proc/$p/stat 2>/dev/null || continue; t=$((t + f[13] + f[14] + f[15] + f[16])); done; echo $t; }
