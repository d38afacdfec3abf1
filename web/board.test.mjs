// Tests of web/static/board.js. Run by web_test.go (`go test ./web`) with `node --test`; DIFFS_JSON names the
// shared table of diff cases (pubsub/testdata/diffs.json), which the Go diff logic is tested against too.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import {
  applyUpdate, changes, tiedWithAbove, formatPlace, formatScore, formatDuration, previousPeriods, RateMeter,
  backoff,
} from "./static/board.js";

const diffsPath = process.env.DIFFS_JSON ||
  fileURLToPath(new URL("../pubsub/testdata/diffs.json", import.meta.url));
// PERIODS_JSON names the shared table of period keys (leaderboard/testdata/periods.json), which the Go period
// rules are tested against too.
const periodsPath = process.env.PERIODS_JSON ||
  fileURLToPath(new URL("../leaderboard/testdata/periods.json", import.meta.url));

const rows = (list) => list.map(({ playerId, rank, score }) => ({ playerId, rank, score }));

test("applyUpdate rebuilds every list of the shared diff table", () => {
  const cases = JSON.parse(readFileSync(diffsPath, "utf8"));
  assert.ok(Array.isArray(cases) && cases.length > 0, `${diffsPath} holds no cases`);
  for (const c of cases) {
    let list = applyUpdate([], { snapshot: true, entries: c.snapshot }, c.first);
    for (const u of c.updates || []) {
      const prev = list;
      const prevJSON = JSON.stringify(prev);
      list = applyUpdate(list, { snapshot: !!u.snapshot, entries: u.entries || [], removed: u.removed || [] },
        c.first);
      assert.equal(JSON.stringify(prev), prevJSON, `${c.name}: applyUpdate changed its input list`);
    }
    assert.deepEqual(rows(list), rows(c.expected), c.name);
  }
});

test("applyUpdate keeps rank order and the length limit", () => {
  const list = applyUpdate([], { snapshot: true, entries: [
    { playerId: "b", rank: 2, score: 5 }, { playerId: "a", rank: 1, score: 9 },
  ] }, 2);
  assert.deepEqual(list.map((e) => e.playerId), ["a", "b"]);
  const next = applyUpdate(list, { snapshot: false, entries: [
    { playerId: "c", rank: 1, score: 10 }, { playerId: "a", rank: 2, score: 9 }], removed: ["b"] }, 2);
  assert.deepEqual(rows(next), [{ playerId: "c", rank: 1, score: 10 }, { playerId: "a", rank: 2, score: 9 }]);
  assert.deepEqual(list.map((e) => e.playerId), ["a", "b"], "input list unchanged");
});

test("changes reports entries, moves and score changes", () => {
  const prev = [{ playerId: "a", rank: 1, score: 9 }, { playerId: "b", rank: 2, score: 5 },
    { playerId: "c", rank: 3, score: 4 }];
  const next = [{ playerId: "b", rank: 1, score: 12 }, { playerId: "a", rank: 2, score: 9 },
    { playerId: "d", rank: 3, score: 8 }];
  const ch = changes(prev, next);
  assert.deepEqual(ch.get("b"), { entered: false, moved: 1, scoreChanged: true });
  assert.deepEqual(ch.get("a"), { entered: false, moved: -1, scoreChanged: false });
  assert.deepEqual(ch.get("d"), { entered: true, moved: 0, scoreChanged: false });
  assert.equal(ch.has("c"), false);
  assert.equal(changes(next, next).size, 0);
});

test("tiedWithAbove marks equal scores on adjacent ranks", () => {
  assert.deepEqual(tiedWithAbove([{ rank: 1, score: 10 }, { rank: 2, score: 10 }, { rank: 3, score: 9 },
    { rank: 5, score: 9 }]), [false, true, false, false]);
});

test("formatting", () => {
  assert.equal(formatPlace({ rank: 1234, approximate: false, topPercent: 4 }), "#1,234");
  assert.equal(formatPlace({ rank: 5000, approximate: true, topPercent: 12.345 }), "top 12%");
  assert.equal(formatPlace({ rank: 50, approximate: true, topPercent: 0.1234 }), "top 0.12%");
  assert.equal(formatPlace({ rank: 50, approximate: true, topPercent: 2.5 }), "top 2.5%");
  assert.equal(formatScore(1234567.891234), "1,234,567.891");
  assert.equal(formatScore(104.37), "104.37");
  assert.equal(formatDuration(59.9), "59s");
  assert.equal(formatDuration(3725), "1h 02m");
  assert.equal(formatDuration(2 * 86400 + 7200), "2d 2h");
  assert.equal(formatDuration(-3), "0s");
});

test("previousPeriods follows the shared period table", () => {
  const cases = JSON.parse(readFileSync(periodsPath, "utf8"));
  assert.ok(Array.isArray(cases) && cases.length > 0, `${periodsPath} holds no cases`);
  for (const c of cases) {
    assert.deepEqual(previousPeriods(c.window, c.current, c.previous.length), c.previous, c.name);
  }
  assert.deepEqual(previousPeriods("DAILY", "yesterday", 2), [], "unknown formats give no periods");
});

test("RateMeter and backoff", () => {
  const m = new RateMeter(10000);
  m.add(30, 1000);
  m.add(20, 5000);
  assert.equal(m.perSecond(5000), 5);
  assert.equal(m.perSecond(11500), 2); // the first 30 fell out of the window
  assert.equal(backoff(0, () => 1), 500);
  assert.equal(backoff(3, () => 1), 4000);
  assert.equal(backoff(30, () => 1), 15000);
  assert.equal(backoff(30, () => 0), 10500);
});
