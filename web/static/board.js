// The dashboard's pure logic: applying topUpdates to a list, finding what moved, formatting. No DOM here, so
// the same module runs in the page and under `node --test` (web/static/board.test.mjs), where it is checked
// against pubsub/testdata/diffs.json, the table the Go rule (internal/livelist.Apply) is tested against too.

/**
 * applyUpdate returns the list after one TopUpdate (the list passed in is not modified). A snapshot replaces
 * the list; a diff drops the removed players, replaces or inserts the changed rows, and keeps the list in rank
 * order, at most `first` long (0: no limit). This is exactly internal/livelist.Apply.
 * @param {Array<{playerId: string, rank: number}>} list
 * @param {{snapshot: boolean, entries: Array, removed?: string[]}} update
 * @param {number} first
 */
export function applyUpdate(list, update, first = 0) {
  let out;
  if (update.snapshot) {
    out = update.entries.slice();
  } else {
    const drop = new Set(update.removed || []);
    for (const e of update.entries) drop.add(e.playerId);
    out = list.filter((e) => !drop.has(e.playerId)).concat(update.entries);
  }
  // Array.prototype.sort is stable, like slices.SortStableFunc.
  out.sort((a, b) => a.rank - b.rank);
  if (first > 0 && out.length > first) out.length = first;
  return out;
}

/**
 * changes compares two lists and tells, per player of `next`, what the screen should show: "new" for a row
 * that entered, the number of places moved up (positive) or down (negative), and whether the score changed.
 * @returns {Map<string, {entered: boolean, moved: number, scoreChanged: boolean}>}
 */
export function changes(prev, next) {
  const before = new Map(prev.map((e) => [e.playerId, e]));
  const out = new Map();
  for (const e of next) {
    const p = before.get(e.playerId);
    if (!p) {
      out.set(e.playerId, { entered: true, moved: 0, scoreChanged: false });
    } else if (p.rank !== e.rank || p.score !== e.score) {
      out.set(e.playerId, { entered: false, moved: p.rank - e.rank, scoreChanged: p.score !== e.score });
    }
  }
  return out;
}

/** tiedWithAbove reports, per row index, whether the row has the same score as the row ranked just above it. */
export function tiedWithAbove(list) {
  return list.map((e, i) => i > 0 && list[i - 1].score === e.score && list[i - 1].rank === e.rank - 1);
}

const scoreFormat = new Intl.NumberFormat("en-US", { maximumFractionDigits: 3 });

/** formatScore prints a score with thousands separators and at most three decimals. */
export function formatScore(x) {
  return scoreFormat.format(x);
}

/**
 * formatPlace describes a player's place: "#7" for an exact rank, or "top 12%" when the rank is estimated
 * (beyond the board's exactTop) — an estimated rank number would claim a precision it does not have.
 */
export function formatPlace(entry) {
  if (!entry.approximate) return "#" + entry.rank.toLocaleString("en-US");
  const p = entry.topPercent;
  const digits = p < 1 ? 2 : p < 10 ? 1 : 0;
  return "top " + Number(p.toFixed(digits)).toString() + "%";
}

/** formatDuration prints a span of seconds as "2d 3h", "3h 05m", "4m 09s" or "12s". */
export function formatDuration(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, "0");
  if (d > 0) return `${d}d ${h}h`;
  if (h > 0) return `${h}h ${pad(m)}m`;
  if (m > 0) return `${m}m ${pad(s % 60)}s`;
  return `${s}s`;
}

/**
 * previousPeriods returns the keys of the n periods before `current` of a window, newest first: "2026-11-28"
 * before "2026-11-29" (DAILY), "2026-W47" before "2026-W48" (WEEKLY, ISO weeks), "2026-10" before "2026-11"
 * (MONTHLY). ALL_TIME has no previous periods. Unknown formats give [].
 */
export function previousPeriods(window, current, n) {
  const out = [];
  let m;
  if (window === "DAILY" && (m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(current))) {
    const t = Date.UTC(+m[1], +m[2] - 1, +m[3]);
    for (let i = 1; i <= n; i++) out.push(new Date(t - i * 86400000).toISOString().slice(0, 10));
  } else if (window === "WEEKLY" && (m = /^(\d{4})-W(\d{2})$/.exec(current))) {
    const monday = isoWeekMonday(+m[1], +m[2]);
    for (let i = 1; i <= n; i++) out.push(isoWeekKey(new Date(monday - i * 7 * 86400000)));
  } else if (window === "MONTHLY" && (m = /^(\d{4})-(\d{2})$/.exec(current))) {
    for (let i = 1; i <= n; i++) {
      const d = new Date(Date.UTC(+m[1], +m[2] - 1 - i, 1));
      out.push(d.toISOString().slice(0, 7));
    }
  }
  return out;
}

// isoWeekMonday returns the UTC time of the Monday that starts ISO week w of year y.
function isoWeekMonday(y, w) {
  const jan4 = Date.UTC(y, 0, 4);
  const dow = (new Date(jan4).getUTCDay() + 6) % 7; // Monday = 0
  return jan4 - dow * 86400000 + (w - 1) * 7 * 86400000;
}

// isoWeekKey returns the ISO week key ("2026-W48") of a UTC date.
function isoWeekKey(d) {
  const thursday = new Date(d.getTime() + (3 - ((d.getUTCDay() + 6) % 7)) * 86400000);
  const y = thursday.getUTCFullYear();
  // The week's Thursday decides its year, and its day of the year its number.
  const week = 1 + Math.floor((thursday - Date.UTC(y, 0, 1)) / 86400000 / 7);
  return `${y}-W${String(week).padStart(2, "0")}`;
}

/**
 * RateMeter counts events over a sliding window of `span` milliseconds and reports them per second.
 */
export class RateMeter {
  constructor(span = 10000) {
    this.span = span;
    this.events = []; // [time, count]
  }
  add(count, now = Date.now()) {
    if (count > 0) this.events.push([now, count]);
    this.trim(now);
  }
  perSecond(now = Date.now()) {
    this.trim(now);
    let n = 0;
    for (const [, c] of this.events) n += c;
    return n / (this.span / 1000);
  }
  trim(now) {
    while (this.events.length && this.events[0][0] <= now - this.span) this.events.shift();
  }
}

/**
 * backoff returns how long to wait before reconnection attempt number `attempt` (0-based): exponential from
 * 500 ms, at most 15 s, with up to 30% random jitter so a fleet of screens does not reconnect in lockstep.
 */
export function backoff(attempt, random = Math.random) {
  const base = Math.min(15000, 500 * 2 ** Math.min(attempt, 10));
  return Math.round(base * (0.7 + 0.3 * random()));
}
