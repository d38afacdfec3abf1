// Package redisinfo reads what Redis reports of itself in INFO: the one reader of its fields and of its
// commandstats section for the benchmarks (cmd/lbbench, the scripts' and the server's Go benchmarks).
package redisinfo

import (
	"slices"
	"strconv"
	"strings"
)

// CommandStat is one line of INFO commandstats: a command's calls, and Redis's microseconds in them. A command a
// script runs counts on its own line as well as in the script call's, whose time includes it.
type CommandStat struct {
	Calls int64
	Usec  float64
}

// ScriptCommands are the commands that run scripts (FCALL, EVALSHA, EVAL and their read-only forms), in
// commandstats' lower case.
var ScriptCommands = []string{"fcall", "fcall_ro", "evalsha", "evalsha_ro", "eval", "eval_ro"}

// IsScriptCommand reports whether name (as CommandStats keys it) runs scripts.
func IsScriptCommand(name string) bool { return slices.Contains(ScriptCommands, name) }

// Field returns the value of a "name:value" line of an INFO reply (redis_version, process_id, used_cpu_sys, ...),
// and whether there is one.
func Field(info, name string) (string, bool) {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v, true
		}
	}
	return "", false
}

// CommandStats parses the text of INFO commandstats (lines "cmdstat_<name>:calls=N,usec=N,..."), by command name
// in lower case, subcommands as "config|resetstat". Lines and fields it does not know are skipped.
func CommandStats(info string) map[string]CommandStat {
	out := map[string]CommandStat{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		var st CommandStat
		for _, kv := range strings.Split(rest, ",") {
			switch k, v, _ := strings.Cut(kv, "="); k {
			case "calls":
				st.Calls, _ = strconv.ParseInt(v, 10, 64)
			case "usec":
				st.Usec, _ = strconv.ParseFloat(v, 64)
			}
		}
		out[name] = st
	}
	return out
}
