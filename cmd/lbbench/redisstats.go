package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/leaderboard/leaderboard/internal/redisinfo"
)

// commandStats reads INFO commandstats (see redisinfo.CommandStats); nil when Redis does not answer (the step's
// tables then leave the breakdown out).
func (e *env) commandStats(ctx context.Context) map[string]redisinfo.CommandStat {
	info, err := e.rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil
	}
	return redisinfo.CommandStats(info)
}

// Keys of Sample.Extra that hold a command's share of a step, per second of it: µs in the command, and calls.
const (
	extraCmdUsec  = "usec:"
	extraCmdCalls = "calls:"
)

// addCommandStats puts the commands Redis ran between before and after (el seconds apart) into s.Extra.
func addCommandStats(s *Sample, before, after map[string]redisinfo.CommandStat, el float64) {
	if before == nil || after == nil || el <= 0 {
		return
	}
	for name, a := range after {
		b := before[name]
		if a.Calls <= b.Calls {
			continue
		}
		s.Extra[extraCmdUsec+name] = (a.Usec - b.Usec) / el
		s.Extra[extraCmdCalls+name] = float64(a.Calls-b.Calls) / el
	}
}

// commandUse is one command's part of an operation of a step: calls and µs per operation.
type commandUse struct {
	name         string
	calls, usec  float64
	scriptRunner bool
}

// commandsPerOp returns the commands of a (median) sample per operation, the most time first.
func commandsPerOp(s Sample) []commandUse {
	if s.Rate <= 0 {
		return nil
	}
	var out []commandUse
	for k, v := range s.Extra {
		name, ok := strings.CutPrefix(k, extraCmdUsec)
		if !ok {
			continue
		}
		out = append(out, commandUse{name: name, usec: v / s.Rate, calls: s.Extra[extraCmdCalls+name] / s.Rate,
			scriptRunner: redisinfo.IsScriptCommand(name)})
	}
	slices.SortFunc(out, func(a, b commandUse) int {
		if a.usec != b.usec {
			if a.usec > b.usec {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	return out
}

// commandTable lists, per step and side, where Redis's time went by command (INFO commandstats): the script
// calls, the commands the scripts ran inside them, and the rest of the script calls' time (their Lua and the
// calls into Redis, less the commands' own work).
func commandTable(title, keyHead, per string) *table {
	t := &table{title: title, head: []string{keyHead, "side", "Redis CPU µs/" + per + " (/proc)",
		"script calls µs/" + per, "scripts' own µs/" + per, "commands inside: calls/" + per + " × µs each"}}
	t.notes = append(t.notes, "From INFO commandstats before and after each measured phase, medians over the runs. "+
		"A script call's time (FCALL, EVALSHA) includes the commands it runs, which also count on their own lines: "+
		"\"scripts' own\" is the script calls' time less theirs (Lua, and converting arguments and replies between "+
		"Lua and Redis). The commands' times are what any implementation that runs the same commands pays at least; "+
		"Redis CPU from /proc also counts reading requests and writing replies. Commands below 0.5 µs per "+
		"operation are left out; other clients' commands during the phase (the servers' background work) count too.")
	return t
}

// addCommandRow adds the commands of one side of a step to a commandTable, per operation, or per item when the
// table counts items (per: the number of items in an operation, 1 otherwise).
func addCommandRow(t *table, key, label string, runs []Sample, per int) {
	m := medianSample(runs)
	if m.Rate <= 0 {
		return
	}
	m.Rate *= float64(max(per, 1))
	var scripts, inside float64
	var parts []string
	for _, c := range commandsPerOp(m) {
		if c.scriptRunner {
			scripts += c.usec
			continue
		}
		inside += c.usec
		if c.usec >= 0.5 {
			parts = append(parts, fmt.Sprintf("%s %.2f × %.2f", strings.ToUpper(c.name), c.calls, c.usec/c.calls))
		}
	}
	own := "-"
	if scripts > 0 {
		own = fmt.Sprintf("%.1f", scripts-inside)
	}
	if len(parts) == 0 {
		parts = []string{"-"}
	}
	t.add(key, label, fmt.Sprintf("%.1f", m.Extra["redis_cpu"]/m.Rate*1e6), fmt.Sprintf("%.1f", scripts), own,
		strings.Join(parts, ", "))
}

// logCommands logs the commands Redis ran between before and after, the most time first (calls, total µs, µs a
// call), so a step's log says where Redis's time went.
func (e *env) logCommands(phase string, before, after map[string]redisinfo.CommandStat) {
	if before == nil || after == nil {
		return
	}
	type use struct {
		name        string
		calls, usec int64
	}
	var us []use
	for name, a := range after {
		b := before[name]
		if a.Calls > b.Calls {
			us = append(us, use{name, a.Calls - b.Calls, int64(a.Usec - b.Usec)})
		}
	}
	slices.SortFunc(us, func(a, b use) int { return int(b.usec - a.usec) })
	var sb strings.Builder
	for i, u := range us {
		if i == 8 {
			break
		}
		fmt.Fprintf(&sb, " %s %d calls %d µs (%.1f µs/call);", u.name, u.calls, u.usec, float64(u.usec)/float64(u.calls))
	}
	e.logf("redis commands %s:%s", phase, sb.String())
}
