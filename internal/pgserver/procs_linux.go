//go:build linux

package pgserver

import (
	"os"
	"strconv"
	"strings"
)

// procID names a process across PID reuse: its PID and its start time (in clock ticks since boot).
type procID struct {
	pid   int
	start uint64
}

// stat reads /proc/<pid>/stat: the parent PID, the state letter and the start time.
func stat(pid int) (ppid int, state byte, start uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, 0, false
	}
	// Format: pid (comm) state ppid ... with starttime the 22nd field; comm may contain spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return 0, 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, 0, false
	}
	return ppid, f[0][0], start, true
}

// self returns this process's procID.
func self() procID {
	_, _, start, _ := stat(os.Getpid())
	return procID{os.Getpid(), start}
}

// descendants lists the processes below pid (children, their children, ...), from /proc.
func descendants(pid int) []procID {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	children := map[int][]procID{}
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, start, ok := stat(p); ok {
			children[ppid] = append(children[ppid], procID{p, start})
		}
	}
	var out []procID
	for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
		for _, c := range children[queue[0]] {
			out = append(out, c)
			queue = append(queue, c.pid)
		}
	}
	return out
}

// alive reports whether p still runs: it exists, is the same process (same start time) and is not a zombie
// (a zombie holds no memory, shared or not).
func alive(p procID) bool {
	_, state, start, ok := stat(p.pid)
	return ok && start == p.start && state != 'Z' && state != 'X'
}
