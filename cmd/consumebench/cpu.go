package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock reads the CPU time (user + system) of this process and, with a
// process group given (-emulator-pgid: the emulator the script started
// with setsid), of every process of that group, from /proc.
type cpuClock struct{ pgid int }

// read returns this process's CPU time and the emulator's (0 without -emulator-pgid).
func (c cpuClock) read() (self, emulator time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	if c.pgid <= 0 {
		return self, 0
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return self, 0
	}
	var ticks int64
	for _, p := range procs {
		f := procStat(p.Name())
		if len(f) < 15 || f[2] != strconv.Itoa(c.pgid) {
			continue
		}
		for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
			n, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += n
		}
	}
	return self, time.Duration(ticks) * time.Second / 100 // USER_HZ is 100 on Linux
}

// procStat returns the fields of /proc/PID/stat after the command name
// (state, ppid, pgrp, …; utime is index 11), or nil.
func procStat(pid string) []string {
	if _, err := strconv.Atoi(pid); err != nil {
		return nil
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// perCall formats d divided by n calls in µs.
func perCall(d time.Duration, n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d.Microseconds())/float64(n))
}
