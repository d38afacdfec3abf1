package main

import (
	"context"

	"errors"
	"fmt"
	"os"
	"path/filepath"

	"strings"

	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderboard/leaderboard/internal/pgserver"
)

// The ledger scenario (7): what the PostgreSQL ledger (the server's DATABASE_URL) costs. The server binary under
// test runs twice against the tool's redis-server: as the new server of every scenario (ledger off, its
// KEY_PREFIX) and as a second process with DATABASE_URL set (ledger on, KEY_PREFIX lbledger) on a PostgreSQL the
// tool starts itself (internal/pgserver: initdb into a temporary directory, a free loopback port, fsync=on and
// synchronous_commit=on). The submit and bulk steps run on both in alternating rounds; the restore and the size
// are the ledger's alone.
const (
	prefixLedger         = "lbledger"
	ledgerEventsFull     = 1_000_000 // events on the restored board (-ledger-events)
	ledgerEventsQuick    = 50_000
	ledgerWritersDefault = 8 // closed-loop writers on other boards around the restore (-ledger-writers)
	ledgerWriterBoards   = 4
	ledgerClients        = 32 // submitScore step
	ledgerBulkItems      = 1000
	ledgerBulkCallers    = 8
)

// pgSettings are the tool's PostgreSQL settings beyond pgserver's (fsync=on, synchronous_commit=on, ...):
// PostgreSQL's own default shared_buffers instead of the 16 MB pgserver gives test servers, and the time of
// every WAL flush counted (pg_stat_wal.wal_sync_time).
var pgSettings = []string{"shared_buffers=128MB", "track_wal_io_timing=on"}

// Targets of the ledger issue.
const (
	ledgerSubmitOfOff     = 0.6                   // submitScore, 32 clients: share of the ledger-off rate
	ledgerSubmitP99       = 20 * time.Millisecond // and its p99
	ledgerBulkRate        = 25_000.0              // submitScores 1000 items × 8 callers: items/s
	ledgerBulkOfOff       = 0.5                   // and share of the ledger-off rate
	ledgerRestoreMillion  = 45 * time.Second      // restore of a board of 1,000,000 events (scaled to other sizes)
	ledgerOthersKeepShare = 0.8                   // other boards' writers during the restore: share of their rate before
)

// ledgerDB is the tool's PostgreSQL and a connection of its own for statistics.
type ledgerDB struct {
	srv     *pgserver.Server
	conn    *pgx.Conn
	version string
	syncBy  string // wal_sync_method
}

func startLedgerDB(ctx context.Context, dir string) (*ledgerDB, error) {
	srv, err := pgserver.New(pgserver.Options{Name: "lbbench", Settings: pgSettings,
		LogPath: filepath.Join(dir, "postgres.log")})
	if err != nil {
		return nil, fmt.Errorf("postgres: %w", err)
	}
	d := &ledgerDB{srv: srv}
	if d.conn, err = pgx.Connect(ctx, srv.URL()); err != nil {
		d.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	if err = d.conn.QueryRow(ctx, "SELECT current_setting('server_version'), current_setting('wal_sync_method')").
		Scan(&d.version, &d.syncBy); err != nil {
		d.close()
		return nil, fmt.Errorf("postgres: %w", err)
	}
	return d, nil
}

func (d *ledgerDB) close() {
	if d.conn != nil {
		d.conn.Close(context.Background())
	}
	d.srv.Remove()
}

// walFlushes returns the WAL flushes to disk so far and their mean time (pg_stat_wal; PostgreSQL's processes
// publish their counts within a second when busy, within ten when they turned idle soon after publishing).
func (d *ledgerDB) walFlushes(ctx context.Context) (n int64, mean time.Duration, err error) {
	var ms float64
	err = d.conn.QueryRow(ctx, `SELECT wal_sync, wal_sync_time FROM pg_stat_wal`).Scan(&n, &ms)
	if n > 0 {
		mean = time.Duration(ms * float64(time.Millisecond) / float64(n))
	}
	return n, mean, err
}

// walLSN is the WAL position written so far, in bytes: exact, unlike the statistics.
func (d *ledgerDB) walLSN(ctx context.Context) (int64, error) {
	var b int64
	err := d.conn.QueryRow(ctx, `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint`).Scan(&b)
	return b, err
}

// recorded returns how many events of the live board the ledger recorded with a recorded_ms in [from, to), and
// in how many transactions (distinct xmin of their rows): how many events a commit carried.
func (d *ledgerDB) recorded(ctx context.Context, board string, from, to time.Time) (events, txns int64, err error) {
	err = d.conn.QueryRow(ctx, `SELECT count(*), count(DISTINCT e.xmin::text)
		FROM events e JOIN boards b USING (board_key)
		WHERE b.id = $1 AND b.deleted_at IS NULL AND e.recorded_ms >= $2 AND e.recorded_ms < $3`,
		[]byte(board), from.UnixMilli(), to.UnixMilli()).Scan(&events, &txns)
	return events, txns, err
}

// cpu is the CPU time of the postmaster and all its processes so far.
func (d *ledgerDB) cpu() time.Duration { return treeCPU(d.srv.Pid()) }

// probeFsync measures the disk under dir as PostgreSQL's WAL flushes meet it: 8 KiB written over the same place
// of a file opened with O_DSYNC (each write returns once it is on the disk), as many as fit in d.
func probeFsync(dir string, d time.Duration) (Sample, error) {
	f, err := os.CreateTemp(dir, "fsync-probe-")
	if err != nil {
		return Sample{}, err
	}
	name := f.Name()
	defer os.Remove(name)
	buf := make([]byte, 8<<10)
	_, err = f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return Sample{}, err
	}
	if f, err = os.OpenFile(name, os.O_WRONLY|syscall.O_DSYNC, 0); err != nil {
		return Sample{}, err
	}
	defer f.Close()
	var lat []time.Duration
	start := time.Now()
	for time.Since(start) < d && len(lat) < 100_000 {
		t0 := time.Now()
		if _, err := f.WriteAt(buf, 0); err != nil {
			return Sample{}, err
		}
		lat = append(lat, time.Since(t0))
	}
	return summarize(lat, time.Since(start)), nil
}

// startLedgerServer runs the new server's binary with DATABASE_URL on db (KEY_PREFIX lbledger). Its boards are
// created through its API, so that the ledger records them.
func (e *env) startLedgerServer(ctx context.Context, db *ledgerDB) (*service, error) {
	sv := &service{name: "ledger", desc: e.newSvc().desc + " with DATABASE_URL", prefix: prefixLedger,
		bin: e.newSvc().bin, viaAPI: true, loaded: map[string]int{}}
	extra := append([]string{"KEY_PREFIX=" + prefixLedger, "DATABASE_URL=" + db.srv.URL()}, e.o.ServerEnv...)
	if e.o.LedgerRestoreShare > 0 {
		extra = append(extra, fmt.Sprintf("LEDGER_RESTORE_SHARE=%g", e.o.LedgerRestoreShare))
		sv.desc += fmt.Sprintf(", LEDGER_RESTORE_SHARE=%g", e.o.LedgerRestoreShare)
	}
	var err error
	sv.proc, sv.addr, err = startServer(ctx, sv.bin, e.dir, "server-ledger.log", "REDIS_URL=redis://"+e.redisAddr, extra...)
	if err != nil {
		return nil, fmt.Errorf("ledger server: %w", err)
	}
	sv.hot = newRawHTTP(sv.addr, "/graphql")
	e.logf("ledger server (%s, KEY_PREFIX %s): pid %d on %s", sv.desc, sv.prefix, sv.proc.pid(), sv.addr)
	return sv, nil
}

// ledgerStep is stepOn with PostgreSQL's share over the measured phase: its CPU in cores (Extra pg_cpu) and, for
// a board of the ledger server (ledgered), the ledger's commits per second that recorded the phase's events of
// the board and the events each carried (commits, per_commit). items is the items per operation.
func (e *env) ledgerStep(ctx context.Context, db *ledgerDB, sv *service, st Step, op Op, items int, board string,
	ledgered bool) (Sample, error) {
	if st.Warmup > 0 {
		drive(ctx, Step{Workers: st.Workers, Duration: st.Warmup, MaxOps: 1 << 62}, op)
		st.Warmup = 0
	}
	c0, m0, t0 := db.cpu(), machineBusy(), time.Now()
	s := e.stepOn(ctx, sv, st, op)
	c1, m1, t1 := db.cpu(), machineBusy(), time.Now()
	s.ItemsPerOp = items
	el := s.Elapsed.Seconds()
	if el <= 0 {
		return s, nil
	}
	s.Extra["pg_cpu"] = (c1 - c0).Seconds() / el
	s.Extra["machine"] = (m1 - m0).Seconds() / t1.Sub(t0).Seconds()
	if ledgered {
		events, txns, err := db.recorded(ctx, board, t0, t1)
		if err != nil {
			return s, fmt.Errorf("postgres: events of %q: %w", board, err)
		}
		s.Extra["commits"] = float64(txns) / el
		if txns > 0 {
			s.Extra["per_commit"] = float64(events) / float64(txns)
		}
	}
	return s, nil
}

// cpuPerItem formats the CPU time per item of server, redis-server, PostgreSQL and the load generator, in µs.
func cpuPerItem(s Sample) string {
	r := s.ItemRate()
	if r == 0 {
		return "-"
	}
	us := func(cores float64) string { return fmt.Sprintf("%.0f", cores/r*1e6) }
	return us(s.CPU) + " / " + us(s.Extra["redis_cpu"]) + " / " + us(s.Extra["pg_cpu"]) + " / " + us(s.Extra["gen_cpu"])
}

// runLedger (scenario 7): the ledger on vs off. It starts PostgreSQL and the ledger server, then runs
//   - submitScore from 32 clients and submitScores of 1000 items from 8 callers on both servers, in alternating
//     rounds (off then on in the 1st, 3rd, ... run, on then off in the others), each step on a fresh board;
//   - the restore: a board filled with LedgerEvents events through the ledger server (submitScores of 1000 items,
//     LoadWorkers callers), its keys deleted from Redis (the board lost, the other boards untouched), then timed
//     from the first request after the loss (which starts the restore) until the board answers whole again,
//     while LedgerWriters clients write to other boards: their rate meanwhile against their rate just before;
//   - the ledger's size: pg_total_relation_size of the events table per event.
func runLedger(ctx context.Context, e *env) ([]*table, error) {
	if err := e.needServer(ctx); err != nil {
		return nil, err
	}
	sz := e.sizes()
	t := &table{title: "7. The ledger: submissions with DATABASE_URL (on) and without (off), same binary, same redis-server",
		head: []string{"step", "side", "items/s", "p50", "p99", "server CPU",
			"CPU µs/item (server / redis / postgres / loadgen)", "machine busy", "ledger commits/s", "items/commit",
			"errors"}}
	rt := &table{title: "7b. The ledger: restore of a board Redis lost, writers on other boards meanwhile",
		head: []string{"writers on other boards", "events", "restore", "events/s",
			"other boards' writes/s (before → during)", "during/before",
			"their p99 (before → during)", "CPU before, cores (server / redis / postgres / loadgen (machine))",
			"CPU during", "UNAVAILABLE answers", "NOT_FOUND / partial answers", "errors"}}
	st := &table{title: "7c. The ledger: size in PostgreSQL",
		head: []string{"events in the ledger", "heap", "indexes", "total (pg_total_relation_size)", "bytes/event",
			"WAL bytes/event (filling the restore board)"}}
	bt := &table{title: "7d. The ledger: the writers of 7b beside a CPU burner, no restore (what work of a restore's size costs them on this machine)",
		head: []string{"burner asked, cores", "burner used", "other boards' writes/s (before → during)",
			"during/before", "model 1 − R/C", "their p99 (before → during)",
			"CPU before, cores (server / redis / postgres / loadgen (machine))", "CPU during", "errors"}}
	tables := []*table{t, rt, bt, st}

	db, err := startLedgerDB(ctx, e.dir)
	if err != nil {
		return nil, err
	}
	defer db.close()
	e.logf("postgres %s on %s (data in %s, wal_sync_method %s)", db.version, db.srv.Addr, db.srv.Dir(), db.syncBy)
	probe, err := probeFsync(db.srv.Dir(), time.Second)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	on, err := e.startLedgerServer(ctx, db)
	if err != nil {
		return nil, err
	}
	defer func() {
		on.proc.stop()
		on.hot.closeAll()
	}()
	off := e.newSvc()
	t.notes = append(t.notes, fmt.Sprintf("off: the new server (%s, KEY_PREFIX %s); on: the same binary with "+
		"DATABASE_URL (KEY_PREFIX %s) on PostgreSQL %s started by the tool (fsync=on, synchronous_commit=on, %s, "+
		"wal_sync_method %s, data under %s). Both against the same redis-server, measured in alternating rounds "+
		"(off then on in the 1st, 3rd, ... run, on then off in the others), each step on a fresh board; figures are "+
		"medians over the runs, on/off the median of the per-round ratios. The requests carry no eventId (as in "+
		"steps 1 and 2). CPU from /proc, per item: PostgreSQL's is the postmaster's and all its processes'; "+
		"machine busy: the cores the whole machine used over the phase, others' processes too (/proc/stat). "+
		"Ledger commits: the transactions that recorded the measured phase's events of the step's board "+
		"(distinct xmin of the rows with a recorded_ms in the phase), each a WAL flush to disk that the "+
		"requests waiting in it share; items/commit: how many they carried. The disk under the "+
		"data directory: %s writes of 8 KiB with O_DSYNC a second from one writer, p50 %s, p99 %s (the flushes "+
		"a single stream of commits could get).",
		off.desc, off.prefix, prefixLedger, db.version, strings.Join(pgSettings, ", "), db.syncBy,
		os.TempDir(), fmtRate(probe.Rate), fmtDur(probe.P50), fmtDur(probe.P99)))

	// Submit and bulk, on and off in alternating rounds.
	sides := []*service{off, on}
	type stepDef struct {
		key     string
		workers int
		items   int
		op      func(sv *service, board string) Op
	}
	steps := []stepDef{
		{fmt.Sprintf("submitScore, %d clients", ledgerClients), ledgerClients, 1,
			func(sv *service, board string) Op { return submitOp(sv, board) }},
		{fmt.Sprintf("submitScores, %d × %d", ledgerBulkItems, ledgerBulkCallers), ledgerBulkCallers, ledgerBulkItems,
			func(sv *service, board string) Op { return bulkOp(sv, board, ledgerBulkItems) }},
	}
	for k, sd := range steps {
		runs := make([][]Sample, len(sides))
		for r := 0; r < e.o.Runs; r++ {
			order := []int{0, 1}
			if r%2 == 1 {
				order = []int{1, 0}
			}
			for _, i := range order {
				sv := sides[i]
				board := fmt.Sprintf("ledger-%d-%s-%d", k, sv.name, r)
				if err := e.createBoardOn(ctx, sv, board, 0); err != nil {
					return tables, err
				}
				s, err := e.ledgerStep(ctx, db, sv, e.stepOf(sd.workers), sd.op(sv, board), sd.items, board, sv == on)
				if err != nil {
					return tables, err
				}
				runs[i] = append(runs[i], s)
			}
		}
		for i, label := range []string{"off", "on"} {
			m := medianSample(runs[i])
			commits, per := "-", "-"
			if c := m.Extra["commits"]; c > 0 {
				commits, per = fmt.Sprintf("%.0f", c), fmt.Sprintf("%.1f", m.Extra["per_commit"])
			}
			t.add(sd.key, label, fmtRate(m.ItemRate()), fmtDur(m.P50), fmtDur(m.P99), fmtCores(m.CPU),
				cpuPerItem(m), fmtCores(m.Extra["machine"]), commits, per, fmtErrs(m))
		}
		ratio := func(f func(Sample) float64) string { return fmtTimes(medianRatio(runs[1], runs[0], f)) }
		perItem := func(f func(Sample) float64) func(Sample) float64 {
			return func(s Sample) float64 {
				if s.ItemRate() == 0 {
					return 0
				}
				return f(s) / s.ItemRate()
			}
		}
		share := medianRatio(runs[1], runs[0], Sample.ItemRate)
		t.add(sd.key, "on/off", fmtTimes(share),
			ratio(func(s Sample) float64 { return float64(s.P50) }),
			ratio(func(s Sample) float64 { return float64(s.P99) }),
			ratio(func(s Sample) float64 { return s.CPU }),
			ratio(perItem(func(s Sample) float64 { return s.CPU }))+" / "+
				ratio(perItem(func(s Sample) float64 { return s.Extra["redis_cpu"] }))+" / - / "+
				ratio(perItem(func(s Sample) float64 { return s.Extra["gen_cpu"] })), "", "", "", "")
		mOn, mOff := medianSample(runs[1]), medianSample(runs[0])
		errs := mOn.Errs + mOff.Errs
		if k == 0 {
			e.check("ledger: submitScore, 32 clients",
				fmt.Sprintf("≥ %.1f× the ledger-off rate, p99 ≤ %s", ledgerSubmitOfOff, fmtDur(ledgerSubmitP99)),
				fmt.Sprintf("%s (%s vs %s req/s), p99 %s", fmtTimes(share), fmtRate(mOn.Rate), fmtRate(mOff.Rate),
					fmtDur(mOn.P99)),
				share >= ledgerSubmitOfOff && mOn.P99 <= ledgerSubmitP99 && errs == 0)
		} else {
			e.check(fmt.Sprintf("ledger: submitScores, %d items × %d callers", ledgerBulkItems, ledgerBulkCallers),
				fmt.Sprintf("≥ %s items/s, ≥ %.1f× the ledger-off rate", fmtRate(ledgerBulkRate), ledgerBulkOfOff),
				fmt.Sprintf("%s items/s, %s (off %s)", fmtRate(mOn.ItemRate()), fmtTimes(share),
					fmtRate(mOff.ItemRate())),
				mOn.ItemRate() >= ledgerBulkRate && share >= ledgerBulkOfOff && errs == 0)
		}
	}

	walPerEvent, err := e.restoreSteps(ctx, on, db, rt, bt, sz)
	if err != nil {
		return tables, err
	}

	// The size.
	var heap, indexes, total, events int64
	if err := db.conn.QueryRow(ctx, `SELECT pg_relation_size('events'), pg_indexes_size('events'),
		pg_total_relation_size('events'), (SELECT count(*) FROM events)`).Scan(&heap, &indexes, &total, &events); err != nil {
		return tables, fmt.Errorf("postgres: size of the events table: %w", err)
	}
	if events == 0 {
		return tables, errors.New("postgres: the events table is empty")
	}
	per := func(b int64) string { return fmt.Sprintf("%.0f", float64(b)/float64(events)) }
	walPer := fmt.Sprintf("%.0f", walPerEvent)
	st.add(fmt.Sprint(events), fmtBytes(heap)+" ("+per(heap)+" B/event)", fmtBytes(indexes)+" ("+per(indexes)+" B/event)",
		fmtBytes(total), per(total), walPer)
	st.notes = append(st.notes, "Every event of the scenario's boards (the steps above, the restore board, the "+
		"writers' boards), without eventIds. Heap: pg_relation_size (the table's rows); indexes: pg_indexes_size "+
		"(the primary key (board, seq), the player index, the eventId index); total adds TOAST and the free space "+
		"and visibility maps. WAL: how far the write-ahead log moved (pg_current_wal_lsn) while the restore "+
		"board was filled, per event.")
	if flushes, mean, err := db.walFlushes(ctx); err == nil && flushes > 0 {
		t.notes = append(t.notes, fmt.Sprintf("PostgreSQL, started for this scenario, flushed its WAL to disk %d "+
			"times (pg_stat_wal.wal_sync at the end, as far as its processes had published it), %s each on "+
			"average (wal_sync_time, track_wal_io_timing=on).", flushes, fmtDur(mean)))
	}
	e.check("ledger: size in PostgreSQL", "bytes per event reported",
		fmt.Sprintf("%s B/event (%d events, %s)", per(total), events, fmtBytes(total)), total > 0)
	return tables, nil
}

// cpuSnap is the CPU time so far of the processes of a ledger step: the server, redis-server, PostgreSQL (the
// postmaster and all its processes) and the load generator; and of the whole machine, others' processes too.
type cpuSnap struct {
	at                              time.Time
	server, redis, pg, gen, machine time.Duration
}

func (e *env) cpuSnap(sv *service, db *ledgerDB) cpuSnap {
	return cpuSnap{at: time.Now(), server: sv.usage().CPU, redis: e.redisUsage().CPU, pg: db.cpu(), gen: selfUsage().CPU,
		machine: machineBusy()}
}

// cores returns the cores each process used from a to b, as a Sample's Extra.
func (a cpuSnap) cores(b cpuSnap) map[string]float64 {
	el := b.at.Sub(a.at).Seconds()
	if el <= 0 {
		return map[string]float64{}
	}
	c := func(x, y time.Duration) float64 { return (y - x).Seconds() / el }
	return map[string]float64{"server": c(a.server, b.server), "redis": c(a.redis, b.redis), "pg": c(a.pg, b.pg),
		"gen": c(a.gen, b.gen), "machine": c(a.machine, b.machine)}
}

// fmtCoreSet formats the cores of a span: the four processes, then the machine's.
func fmtCoreSet(x map[string]float64) string {
	return fmt.Sprintf("%.2f / %.2f / %.2f / %.2f (%.2f)", x["server"], x["redis"], x["pg"], x["gen"], x["machine"])
}
