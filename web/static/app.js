// The dashboard page: picks a board, window and period, shows the top N live from topUpdates, follows one
// player through rankUpdates, and keeps the board facts and the connection state on screen.
//
// URL parameters (all optional) make a screen reproducible: board, window, period, n (10..100), player, tv=1.
import {
  applyUpdate, changes, tiedWithAbove, formatScore, formatPlace, formatDuration, previousPeriods, RateMeter,
} from "./board.js";
import { query, LiveClient, GraphQLError } from "./live.js";

const ENDPOINT = "/graphql";
const WS_URL = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + ENDPOINT;
const MOVE_SHOWN_MS = 8000; // how long the ▲/▼/NEW marks stay
const ANNOUNCE_EVERY_MS = 15000; // the live region speaks at most this often (leader changes only)

const ENTRY = "playerId displayName rank approximate score topPercent";
const Q_BOARDS = `query Boards { leaderboards { id title order mode windows timezone exactTop } }`;
const Q_FACTS = `query Facts($id: ID!, $window: Window) {
  leaderboard(id: $id) { currentPeriod(window: $window) nextReset(window: $window) } }`;
const S_TOP = `subscription Top($board: ID!, $first: Int, $window: Window, $period: String) {
  topUpdates(board: $board, first: $first, window: $window, period: $period) {
    board window period version snapshot size removed entries { ${ENTRY} } } }`;
const Q_PLAYER = `query Player($board: ID!, $player: ID!, $window: Window, $period: String) {
  rank(board: $board, playerId: $player, window: $window, period: $period) { ${ENTRY} }
  aroundMe(board: $board, playerId: $player, radius: 3, window: $window, period: $period) { ${ENTRY} } }`;
const S_RANK = `subscription Rank($board: ID!, $player: ID!, $window: Window) {
  rankUpdates(board: $board, playerId: $player, window: $window) { ${ENTRY} } }`;

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const reducedMotion = matchMedia("(prefers-reduced-motion: reduce)");

const state = {
  boards: [],
  board: null, // the selected board object
  window: "",
  period: "", // "" = the current period (followed across resets)
  first: clampFirst(params.get("n")),
  list: [],
  version: 0,
  period_: "", // the period the list is from
  size: null,
  nextReset: null,
  lastUpdate: 0,
  rate: new RateMeter(10000),
  moves: new Map(), // playerId -> {text, cls, label, until}
  stopTop: null,
  player: params.get("player") || "",
  stopRank: null,
  lastAnnounce: 0,
  leader: null,
};

const live = new LiveClient(WS_URL, showConnection, explainRefusal);

function clampFirst(v) {
  const n = parseInt(v, 10);
  return [10, 25, 50, 100].includes(n) ? n : 10;
}

// ---- start-up ----

if (params.get("tv") === "1") document.body.classList.add("tv");
$("first-select").value = String(state.first);
start();

async function start(attempt = 0) {
  try {
    const data = await query(ENDPOINT, Q_BOARDS);
    state.boards = data.leaderboards;
    hideError();
  } catch (err) {
    if (handleAuth(err)) return;
    showError(`Cannot load the boards (${err.message}); retrying…`);
    setTimeout(() => start(attempt + 1), Math.min(15000, 1000 * 2 ** attempt));
    return;
  }
  if (state.boards.length === 0) {
    showError("There are no leaderboards yet. Create one with the createLeaderboard mutation, or start the server with -demo.");
    setTimeout(() => start(0), 5000);
    return;
  }
  fillSelect($("board-select"), state.boards.map((b) => [b.id, b.title || b.id]));
  const wanted = state.boards.find((b) => b.id === params.get("board")) || state.boards[0];
  await selectBoard(wanted, params.get("window"), params.get("period"));
  if (state.player) {
    $("player-input").value = state.player;
    showPlayer(state.player);
  }
}

async function selectBoard(board, window, period) {
  state.board = board;
  $("board-select").value = board.id;
  $("title").textContent = board.title || board.id;
  const parts = [board.order === "ASC" ? "lower is better" : "higher is better", board.mode.toLowerCase(),
    board.timezone];
  if (board.exactTop) parts.push(`exact top ${board.exactTop.toLocaleString("en-US")}`);
  $("subtitle").textContent = parts.join(" · ");
  fillSelect($("window-select"), board.windows.map((w) => [w, windowName(w)]));
  state.window = board.windows.includes(window) ? window : board.windows[0];
  $("window-select").value = state.window;
  await selectWindow(period || "");
}

async function selectWindow(period) {
  state.period = period;
  await loadFacts();
  subscribeTop();
  if (state.player) showPlayer(state.player);
  updateURL();
  updateExamples();
}

// loadFacts reads the current period and the next reset of the window, and offers the previous periods.
async function loadFacts() {
  let facts;
  try {
    facts = (await query(ENDPOINT, Q_FACTS, { id: state.board.id, window: state.window })).leaderboard;
  } catch (err) {
    showError(`Cannot read the board (${err.message}).`);
    return;
  }
  if (!facts) return;
  state.nextReset = facts.nextReset ? Date.parse(facts.nextReset) : null;
  const options = [["", `Current (${facts.currentPeriod})`]];
  for (const p of previousPeriods(state.window, facts.currentPeriod, 3)) options.push([p, p]);
  if (state.period && !options.some(([v]) => v === state.period)) options.push([state.period, state.period]);
  fillSelect($("period-select"), options);
  $("period-select").value = state.period;
  $("period-select").disabled = options.length === 1;
}

// ---- the live top list ----

function subscribeTop() {
  state.stopTop?.();
  state.list = [];
  state.version = 0;
  state.moves.clear();
  state.leader = null;
  render([], new Map());
  const variables = { board: state.board.id, first: state.first, window: state.window,
    period: state.period || null };
  const stop = live.subscribe(S_TOP, variables, {
    next: (data) => onTopUpdate(data.topUpdates, stop),
    error: (err) => {
      if (handleAuth(err)) return;
      showError(`The live list stopped: ${err.message}`);
    },
  });
  state.stopTop = stop;
}

function onTopUpdate(u, stop) {
  if (stop !== state.stopTop) return; // an update of a subscription that was just replaced
  if (!u.snapshot && u.version !== state.version + 1) {
    // A gap cannot happen on one connection; if it does, start over from a snapshot rather than show a wrong list.
    subscribeTop();
    return;
  }
  hideError();
  const prev = state.list;
  state.list = applyUpdate(prev, u, state.first);
  state.version = u.version;
  state.size = u.size;
  state.period_ = u.period;
  state.lastUpdate = Date.now();
  // A snapshot after a reconnection is compared with what was on screen, so the moves still show.
  const marks = changes(prev, state.list);
  if (prev.length > 0 || !u.snapshot) state.rate.add(marks.size);
  const now = Date.now();
  if (prev.length > 0) {
    for (const [id, m] of marks) {
      if (m.entered) state.moves.set(id, { text: "NEW", cls: "new", label: "new in the list", until: now + MOVE_SHOWN_MS });
      else if (m.moved > 0) state.moves.set(id, { text: `▲${m.moved}`, cls: "up", label: `up ${m.moved}`, until: now + MOVE_SHOWN_MS });
      else if (m.moved < 0) state.moves.set(id, { text: `▼${-m.moved}`, cls: "down", label: `down ${-m.moved}`, until: now + MOVE_SHOWN_MS });
    }
  }
  render(prev, prev.length > 0 ? marks : new Map());
  renderFacts();
  announceLeader();
}

// render draws the list. Rows are tied to positions (row 3 is always rank 3's row), so keyboard focus stays
// put while players move; a player's move is animated by sliding the row's content from its old position.
function render(prev, marks) {
  const tbody = $("rows");
  const oldIndex = new Map(prev.map((e, i) => [e.playerId, i]));
  while (tbody.rows.length < state.list.length) tbody.appendChild(newRow(tbody.rows.length));
  while (tbody.rows.length > state.list.length) tbody.deleteRow(-1);
  const ties = tiedWithAbove(state.list);
  const rowHeight = tbody.rows[0]?.getBoundingClientRect().height || 0;
  const animate = !reducedMotion.matches && rowHeight > 0;
  state.list.forEach((e, i) => {
    const tr = tbody.rows[i];
    fillRow(tr, e, ties[i]);
    const m = marks.get(e.playerId);
    if (!m) return;
    if (m.entered) flash(tr, "flash-new");
    if (m.scoreChanged) flash(tr, "flash-score");
    const from = oldIndex.get(e.playerId);
    if (animate && from !== undefined && from !== i) {
      tr.classList.remove("slide");
      tr.style.transform = `translateY(${(from - i) * rowHeight}px)`;
      tr.getBoundingClientRect(); // apply the start position before the transition starts
      tr.classList.add("slide");
      tr.style.transform = "";
    }
  });
  $("empty").hidden = state.list.length > 0 || state.version === 0;
  const parts = [`Top ${state.first}`, windowName(state.window)];
  if (state.period) parts.push(`${state.period} (closed)`);
  else if (state.window !== "ALL_TIME" && state.period_) parts.push(state.period_);
  $("caption").textContent = parts.join(" · ");
}

function newRow(i) {
  const tr = document.createElement("tr");
  tr.tabIndex = i === 0 ? 0 : -1; // roving tabindex: Tab enters the list once, arrows move within it
  tr.innerHTML = `<td class="rank"></td><td class="move"></td><th scope="row" class="player"></th>` +
    `<td class="score"></td><td class="pct"></td>`;
  tr.addEventListener("animationend", () => tr.classList.remove("flash-new", "flash-score"));
  return tr;
}

function fillRow(tr, e, tied) {
  tr.dataset.player = e.playerId;
  tr.classList.toggle("me", e.playerId === state.player);
  const [rank, move, player, score, pct] = tr.cells;
  rank.textContent = e.rank;
  const m = state.moves.get(e.playerId);
  if (m && m.until > Date.now()) {
    move.innerHTML = `<span class="${m.cls}"><span aria-hidden="true">${m.text}</span>` +
      `<span class="visually-hidden">${m.label}</span></span>`;
  } else {
    move.textContent = "";
  }
  player.textContent = e.displayName || e.playerId;
  if (e.displayName) {
    const id = document.createElement("span");
    id.className = "id";
    id.textContent = e.playerId;
    player.appendChild(id);
  }
  score.textContent = formatScore(e.score);
  if (tied) {
    const t = document.createElement("span");
    t.className = "tie";
    t.title = `Same score as rank ${e.rank - 1}, who reached it first`;
    t.innerHTML = `<span aria-hidden="true">=</span><span class="visually-hidden">tied with rank ${e.rank - 1}:</span>`;
    score.prepend(t);
  }
  pct.textContent = e.topPercent < 0.01 ? "<0.01" : e.topPercent.toFixed(e.topPercent < 10 ? 2 : 1);
}

function flash(tr, cls) {
  tr.classList.remove(cls);
  void tr.offsetWidth; // restart the animation
  tr.classList.add(cls);
}

// Expired movement marks are cleared once a second.
setInterval(() => {
  const now = Date.now();
  let expired = false;
  for (const [id, m] of state.moves) {
    if (m.until <= now) {
      state.moves.delete(id);
      expired = true;
    }
  }
  if (expired) {
    const ties = tiedWithAbove(state.list);
    state.list.forEach((e, i) => fillRow($("rows").rows[i], e, ties[i]));
  }
  renderFacts();
}, 1000);

// ---- facts, connection state, announcements ----

function renderFacts() {
  $("fact-size").textContent = state.size == null ? "–" : state.size.toLocaleString("en-US");
  $("fact-period").textContent = state.period_ || "–";
  if (state.nextReset && !state.period) {
    const left = (state.nextReset - Date.now()) / 1000;
    $("fact-reset").textContent = left > 0 ? formatDuration(left) : "now";
    if (left < -2 && !state.reloadingFacts) {
      // The period rolled over: the subscription follows it by itself; the facts are read again.
      state.reloadingFacts = true;
      loadFacts().finally(() => { state.reloadingFacts = false; });
    }
  } else {
    $("fact-reset").textContent = state.period ? "closed" : "never";
  }
  $("fact-rate").textContent = state.version ? state.rate.perSecond().toFixed(1) : "–";
  $("fact-last").textContent = state.lastUpdate ? `${formatDuration((Date.now() - state.lastUpdate) / 1000)} ago` : "–";
}

// explainRefusal asks the server why the websocket closed before it opened, since the browser does not say: the
// page's origin may be one the server does not accept (a wall screen opened under the machine's name, not
// localhost: PUBLIC_ORIGIN). The answer stays on screen until live updates work; asked once per failing streak.
let refusal = "";
async function explainRefusal() {
  if (refusal) return;
  let res;
  try {
    res = await fetch("/websocket-origin", { method: "POST" }); // a POST carries the page's Origin
  } catch {
    return; // the server is away: "Reconnecting" says enough
  }
  if (res.status !== 403) return;
  const body = await res.json().catch(() => ({}));
  refusal = "Live updates are refused by the server: " +
    (body.errors?.[0]?.message || `it does not accept websockets from ${location.origin}; set PUBLIC_ORIGIN`);
  showError(refusal);
  $("conn").dataset.refused = "true";
}

function showConnection(s, seconds) {
  const el = $("conn");
  if (s === "connected" && refusal) {
    refusal = "";
    delete el.dataset.refused;
    hideError();
  }
  const was = el.dataset.state;
  el.dataset.state = s === "idle" ? "connecting" : s;
  const text = {
    connecting: "Connecting…",
    connected: "Live",
    reconnecting: el.dataset.refused ? `Origin refused; retrying in ${seconds} s…` : `Reconnecting in ${seconds} s…`,
    offline: "Offline",
    idle: "Idle",
  }[s];
  $("conn-text").textContent = text;
  // Only real transitions are spoken, not the countdown.
  if (was !== el.dataset.state) {
    if (s === "connected" && (was === "reconnecting" || was === "offline")) announce("Live updates are back.");
    if ((s === "reconnecting" || s === "offline") && was === "connected") announce("Connection lost; reconnecting.");
  }
}

function announce(text) {
  $("announce").textContent = text;
  state.lastAnnounce = Date.now();
}

// announceLeader speaks when somebody new leads the list, at most every ANNOUNCE_EVERY_MS: a screen reader
// user hears what matters without a stream of rank changes.
function announceLeader() {
  const top = state.list[0];
  if (!top) return;
  const first = state.leader === null;
  if (top.playerId === state.leader) return;
  if (!first && Date.now() - state.lastAnnounce < ANNOUNCE_EVERY_MS) return;
  state.leader = top.playerId;
  if (!first) announce(`${top.displayName || top.playerId} now leads with ${formatScore(top.score)}.`);
}

// ---- the player panel ----

let aroundTimer = null;

async function showPlayer(id) {
  state.stopRank?.();
  state.stopRank = null;
  state.player = id;
  updateURL();
  state.list.forEach((e, i) => $("rows").rows[i]?.classList.toggle("me", e.playerId === id));
  if (!id) {
    $("player-out").hidden = true;
    return;
  }
  $("player-out").hidden = false;
  $("player-name").textContent = id;
  $("player-live").textContent = "Loading…";
  const board = state.board.id;
  const window = state.window;
  let data;
  try {
    data = await query(ENDPOINT, Q_PLAYER, { board, player: id, window, period: state.period || null });
  } catch (err) {
    $("player-live").textContent = `Cannot read the player: ${err.message}`;
    return;
  }
  if (state.player !== id) return;
  showEntry(data.rank);
  showAround(data.aroundMe);
  if (state.period) {
    $("player-live").textContent = "A closed period: no live updates.";
    return;
  }
  $("player-live").textContent = data.rank ? "Live: updates as the rank changes." : "No score in this period yet.";
  state.stopRank = live.subscribe(S_RANK, { board, player: id, window }, {
    next: (d) => {
      if (state.player !== id) return;
      // Rank 0 means the player has no score (not yet, or removed).
      const e = d.rankUpdates.rank === 0 ? null : d.rankUpdates;
      showEntry(e);
      $("player-live").textContent = e
        ? `Live · updated ${new Date().toLocaleTimeString()}`
        : "No score in this period yet.";
      clearTimeout(aroundTimer);
      aroundTimer = setTimeout(() => refreshAround(id), 500); // coalesces bursts of rank changes
    },
    error: (err) => {
      if (state.player === id) $("player-live").textContent = err.message;
    },
  });
}

async function refreshAround(id) {
  try {
    const data = await query(ENDPOINT, Q_PLAYER, { board: state.board.id, player: id, window: state.window });
    if (state.player === id) showAround(data.aroundMe);
  } catch {
    // The next rank change tries again.
  }
}

function showEntry(e) {
  $("player-name").textContent = e?.displayName ? `${e.displayName} (${e.playerId})` : state.player;
  $("player-place").textContent = e ? formatPlace(e) : "–";
  $("player-approx").hidden = !e?.approximate;
  $("player-score").textContent = e ? formatScore(e.score) : "–";
  $("player-pct").textContent = e ? `${e.topPercent < 0.01 ? "<0.01" : e.topPercent.toFixed(2)}%` : "–";
}

function showAround(entries) {
  const tbody = $("around-rows");
  tbody.textContent = "";
  for (const e of entries || []) {
    const tr = tbody.insertRow();
    tr.classList.toggle("me", e.playerId === state.player);
    tr.insertCell().textContent = e.approximate ? "≈" + formatPlace(e).replace("#", "") : e.rank;
    tr.insertCell().textContent = e.displayName || e.playerId;
    const s = tr.insertCell();
    s.className = "score";
    s.textContent = formatScore(e.score);
  }
}

// ---- controls and keyboard ----

$("board-select").addEventListener("change", (ev) => {
  const b = state.boards.find((x) => x.id === ev.target.value);
  if (b) selectBoard(b, state.window, "");
});
$("window-select").addEventListener("change", (ev) => {
  state.window = ev.target.value;
  selectWindow("");
});
$("period-select").addEventListener("change", (ev) => {
  state.period = ev.target.value;
  subscribeTop();
  if (state.player) showPlayer(state.player);
  updateURL();
});
$("first-select").addEventListener("change", (ev) => {
  state.first = clampFirst(ev.target.value);
  subscribeTop();
  updateURL();
  updateExamples();
});
$("player-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  showPlayer($("player-input").value.trim());
});
$("key-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  localStorage.setItem("lb.readKey", $("key-input").value.trim());
  location.reload();
});

$("rows").addEventListener("keydown", (ev) => {
  const tr = ev.target.closest("tr");
  if (!tr) return;
  const rows = $("rows").rows;
  let to = null;
  if (ev.key === "ArrowDown") to = rows[Math.min(tr.sectionRowIndex + 1, rows.length - 1)];
  else if (ev.key === "ArrowUp") to = rows[Math.max(tr.sectionRowIndex - 1, 0)];
  else if (ev.key === "Home") to = rows[0];
  else if (ev.key === "End") to = rows[rows.length - 1];
  else if (ev.key === "Enter" && tr.dataset.player) {
    $("player-input").value = tr.dataset.player;
    showPlayer(tr.dataset.player);
    ev.preventDefault();
    return;
  }
  if (to) {
    ev.preventDefault();
    tr.tabIndex = -1;
    to.tabIndex = 0;
    to.focus();
  }
});
$("rows").addEventListener("click", (ev) => {
  const tr = ev.target.closest("tr");
  if (tr?.dataset.player) {
    $("player-input").value = tr.dataset.player;
    showPlayer(tr.dataset.player);
  }
});

document.addEventListener("keydown", (ev) => {
  if (ev.target.closest("input, select, textarea, button") || ev.ctrlKey || ev.metaKey || ev.altKey) return;
  if (ev.key === "/") {
    ev.preventDefault();
    if (document.body.classList.contains("tv")) toggleTV();
    $("player-input").focus();
  } else if (ev.key === "t") {
    toggleTV();
  }
});

function toggleTV() {
  document.body.classList.toggle("tv");
  updateURL();
}

// ---- helpers ----

function updateURL() {
  const p = new URLSearchParams();
  if (state.board) p.set("board", state.board.id);
  if (state.window) p.set("window", state.window);
  if (state.period) p.set("period", state.period);
  if (state.first !== 10) p.set("n", state.first);
  if (state.player) p.set("player", state.player);
  if (document.body.classList.contains("tv")) p.set("tv", "1");
  history.replaceState(null, "", "?" + p.toString());
}

// updateExamples links GraphiQL with example operations for the board on screen.
function updateExamples() {
  const b = state.board.id;
  const w = state.window;
  const examples = [
    ["Top list", `query Top($board: ID!, $window: Window) {
  top(board: $board, first: ${state.first}, window: $window) { rank playerId displayName score topPercent }
}`, { board: b, window: w }],
    ["A player's rank and neighbours", `query Player($board: ID!, $player: ID!) {
  rank(board: $board, playerId: $player) { rank approximate score topPercent }
  aroundMe(board: $board, playerId: $player, radius: 2) { rank playerId score }
}`, { board: b, player: state.list[0]?.playerId || "player-1" }],
    ["Live top 5 (subscription)", `subscription Live($board: ID!) {
  topUpdates(board: $board, first: 5) { version snapshot entries { rank playerId score } removed size }
}`, { board: b }],
    ["Submit a score (needs a submit key)", `# Put {"Authorization": "Bearer <key>"} in the Headers tab.
mutation Submit($board: ID!) {
  submitScore(input: { board: $board, playerId: "me", score: 42 }) {
    entry { rank score } previousRank updated
  }
}`, { board: b }],
    ["All boards", `query Boards {
  leaderboards { id title order mode windows exactTop currentPeriod nextReset size }
}`, {}],
  ];
  const ul = $("examples");
  ul.textContent = "";
  for (const [label, q, vars] of examples) {
    const a = document.createElement("a");
    const p = new URLSearchParams({ query: q, variables: JSON.stringify(vars, null, 2) });
    a.href = "/graphiql?" + p.toString();
    a.textContent = label;
    const li = document.createElement("li");
    li.appendChild(a);
    ul.appendChild(li);
  }
}

function fillSelect(sel, options) {
  sel.textContent = "";
  for (const [value, label] of options) sel.add(new Option(label, value));
}

function windowName(w) {
  return { ALL_TIME: "All time", DAILY: "Daily", WEEKLY: "Weekly", MONTHLY: "Monthly", SEASON: "Season" }[w] || w;
}

function showError(text) {
  $("error").textContent = text;
  $("error").hidden = false;
}

function hideError() {
  if (refusal) {
    showError(refusal); // it stays until live updates work
    return;
  }
  $("error").hidden = true;
}

// handleAuth shows the read-key form when the server requires a key for reads.
function handleAuth(err) {
  if (!(err instanceof GraphQLError) || (err.code !== "UNAUTHENTICATED" && err.code !== "FORBIDDEN")) return false;
  $("key-form").hidden = false;
  showError("This server requires a read key.");
  return true;
}
