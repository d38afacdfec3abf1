package leaderboard

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// script is one of the board scripts (submit.lua, top.lua, ...), which all start with common.lua. Redis runs it
// as a function of one library that holds every script (FUNCTION LOAD once per Redis, then FCALL): common.lua's
// locals and functions are then set up once per load instead of on every call, about 35,000 of Redis's
// instructions per call (a third of a point read). On servers without functions (the embedded store, Redis
// before 7) it runs as EVALSHA of common.lua followed by the script.
type script struct {
	role     string        // "submit", "top", ...
	body     string        // the script after common.lua
	readOnly bool          // registered no-writes: runs while Redis is out of memory, as reads should
	eval     *redis.Script // common.lua + body, for EVAL/EVALSHA
	// items, when set, says that the script applies a list of items one after another, each on its own, and
	// replies with one value per item: calls on the same key with the same header may then be merged (batcher).
	items *itemArgs
	// prologue starts each call (prologue or ledgerPrologue).
	prologue string
}

// renderCommon returns common.lua with the parts Go owns rendered in, each at its marker line: the key layout
// (keys.go), the record format (record.go) and the aroundMe window (aroundplain.go). The result is the text every
// script starts with.
func renderCommon(src string) string {
	for _, part := range []struct{ marker, lua string }{
		{keysMarker, luaKeys()},
		{recordMarker, luaRecord()},
		{aroundMarker, luaAroundWindow},
	} {
		if strings.Count(src, part.marker) != 1 {
			panic("leaderboard: common.lua needs one line " + strings.TrimSpace(part.marker))
		}
		src = strings.Replace(src, part.marker, part.lua, 1)
	}
	return src
}

// itemArgs is the argument layout of a script that takes a list of items: header arguments first, of which the
// one at count gives the number of items, then the items' arguments.
type itemArgs struct {
	header, count int
}

// prologue starts every call: common.lua's base, its bound library functions (bind), and no ledger gate (LG).
// ledgerPrologue starts a ledgered call: the gate's arguments, taken off the end of ARGV (ledger_args).
//
// A call declares one key, KEYS[1]: the board's definition (keyDef; functions.run names it from the key base the
// caller gives), which every script reads first and which lives as long as the board. So while a cluster moves
// the board's slot, Redis runs the call where the definition is (on the old node until the keys move, then on the
// new one after ASK): a key the call does not declare is never looked for on the wrong node as long as a slot's
// keys move in one step (see "Running on Redis Cluster" in the README). base is KEYS[1] without the definition's
// name.
var (
	prologue       = "base = string.sub(KEYS[1], 1, -" + strconv.Itoa(len(keyDef.name)+1) + ")\nif not rcall then bind() end\nLG = nil\n"
	ledgerPrologue = "base = string.sub(KEYS[1], 1, -" + strconv.Itoa(len(keyDef.name)+1) + ")\nif not rcall then bind() end\nLG = ledger_args(ARGV)\n"
)

// declared returns the keys a call declares: the definition of the board whose key base is keys[0], then the
// rest.
func declared(keys []string) []string {
	out := make([]string, len(keys))
	out[0] = keyDef.of(keys[0])
	copy(out[1:], keys[1:])
	return out
}

func newScript(role, body string, readOnly bool) *script {
	// Every call starts by setting common.lua's base, so the same text runs as a script and as a function.
	return &script{role: role, body: body, readOnly: readOnly, prologue: prologue,
		eval: redis.NewScript(commonLua + prologue + body)}
}

// ledgered returns sc as it applies events the ledger recorded: the same body behind the ledger's gate (see
// common.lua), called with the gate's arguments last (ledgerArg).
func (sc *script) ledgered() *script {
	l := &script{role: "l_" + sc.role, body: sc.body, readOnly: sc.readOnly, items: sc.items,
		prologue: ledgerPrologue, eval: redis.NewScript(commonLua + ledgerPrologue + sc.body)}
	return l
}

// withItems declares sc's item layout (see itemArgs).
func (sc *script) withItems(header, count int) *script {
	sc.items = &itemArgs{header: header, count: count}
	return sc
}

// scriptLibrary is the Redis function library of all scripts. Its name carries a hash of its code, so servers of
// different versions sharing one Redis (a rolling deploy) each call their own functions.
type scriptLibrary struct {
	name string
	code string
	fn   map[*script]string // function names: <library>_<role>
}

func newLibrary(scripts ...*script) *scriptLibrary {
	h := sha1.New()
	h.Write([]byte(commonLua))
	for _, sc := range scripts {
		fmt.Fprintf(h, "\x00%s\x00%t\x00%s", sc.role, sc.readOnly, sc.body)
	}
	lib := &scriptLibrary{name: "lb_" + hex.EncodeToString(h.Sum(nil))[:16], fn: map[*script]string{}}
	var b strings.Builder
	fmt.Fprintf(&b, "#!lua name=%s\n%s\n", lib.name, commonLua)
	for _, sc := range scripts {
		lib.fn[sc] = lib.name + "_" + sc.role
		flags := "{}"
		if sc.readOnly {
			flags = "{'no-writes'}"
		}
		fmt.Fprintf(&b, "redis.register_function{function_name='%s', flags=%s, callback=function(KEYS, ARGV)\n"+
			"%s%s\nend}\n", lib.fn[sc], flags, sc.prologue, sc.body)
	}
	lib.code = b.String()
	return lib
}

// functions runs scripts on one Redis (standalone or Cluster), loading the library where it is missing.
type functions struct {
	rdb    redis.UniversalClient
	lib    *scriptLibrary
	mode   atomic.Int32  // modeUnknown until the first load, then modeFunctions or modeEval
	loads  atomic.Uint64 // loads so far
	loadMu sync.Mutex
}

const (
	modeUnknown int32 = iota
	modeFunctions
	modeEval // the server has no functions
)

func newFunctions(rdb redis.UniversalClient, lib *scriptLibrary) *functions {
	return &functions{rdb: rdb, lib: lib}
}

// run runs one script call on its own.
func (f *functions) run(ctx context.Context, sc *script, keys []string, args ...any) *redis.Cmd {
	keys = declared(keys)
	mode := f.mode.Load()
	if mode == modeEval {
		return sc.eval.Run(ctx, f.rdb, keys, args...)
	}
	// Until a first answer says otherwise, the library is assumed loaded: another process of this version may
	// have loaded it, and FUNCTION LOAD blocks Redis while it compiles the library.
	loads := f.loads.Load()
	cmd := f.rdb.FCall(ctx, f.lib.fn[sc], keys, args...)
	if mode == modeUnknown && cmd.Err() != nil && noFunctions(cmd.Err()) {
		f.mode.Store(modeEval) // no FCALL here (the embedded store, Redis before 7): nothing ran
		return sc.eval.Run(ctx, f.rdb, keys, args...)
	}
	if functionMissing(cmd.Err()) {
		// FUNCTION FLUSH, a Redis that restarted empty, or a new cluster master: load where missing and call
		// again (a missing function ran nothing).
		if err := f.load(ctx, loads); err != nil {
			cmd.SetErr(err)
			return cmd
		}
		cmd = f.rdb.FCall(ctx, f.lib.fn[sc], keys, args...)
	}
	return cmd
}

// queue adds a call to a pipeline the way run would make it. A call whose reply then says that the function or
// script is missing must be made again with run.
func (f *functions) queue(ctx context.Context, pipe redis.Pipeliner, sc *script, keys []string, args ...any) *redis.Cmd {
	keys = declared(keys)
	if f.mode.Load() == modeEval {
		return sc.eval.EvalSha(ctx, pipe, keys, args...)
	}
	return pipe.FCall(ctx, f.lib.fn[sc], keys, args...)
}

// ScriptMissing reports whether err is Redis saying that a function or script is not loaded (or that it has no
// functions at all): run loads it, or switches to EVALSHA, and calls again, and a pipelined call is made again with
// run, so it is not a failure of the call.
func ScriptMissing(err error) bool {
	return err != nil && (functionMissing(err) || strings.HasPrefix(err.Error(), "NOSCRIPT") || noFunctions(err))
}

func functionMissing(err error) bool {
	return err != nil && strings.HasPrefix(err.Error(), "ERR Function not found")
}

// load loads the library on every master (REPLACE: loading it again is harmless) unless it was loaded since the
// caller saw seen loads. A server without FUNCTION switches the store to EVALSHA for good.
func (f *functions) load(ctx context.Context, seen uint64) error {
	f.loadMu.Lock()
	defer f.loadMu.Unlock()
	if f.loads.Load() != seen {
		return nil
	}
	one := func(ctx context.Context, c *redis.Client) error {
		return c.FunctionLoadReplace(ctx, f.lib.code).Err()
	}
	var err error
	if cc, ok := f.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, one)
	} else if c, ok := f.rdb.(*redis.Client); ok {
		err = one(ctx, c)
	} else {
		err = f.rdb.FunctionLoadReplace(ctx, f.lib.code).Err()
	}
	switch {
	case err == nil:
		f.mode.Store(modeFunctions)
	case noFunctions(err):
		f.mode.Store(modeEval)
	default:
		return err
	}
	f.loads.Add(1)
	return nil
}

// noFunctions reports whether err says that the server has no FUNCTION command.
func noFunctions(err error) bool {
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "unknown command") || strings.Contains(msg, "unknown subcommand")
}
