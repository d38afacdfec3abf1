// GraphQL for the dashboard: queries over HTTP POST, subscriptions over one graphql-transport-ws websocket on
// the same path, reconnected with back-off. After a reconnection every subscription is started again, so each
// one begins with a fresh snapshot (topUpdates) or entry (rankUpdates): the screen resumes from the current
// state, never from a stale one.
import { backoff } from "./board.js";

/** GraphQLError carries the errors of a response; code is the first error's extensions.code. */
export class GraphQLError extends Error {
  constructor(errors) {
    super(errors.map((e) => e.message).join("; "));
    this.errors = errors;
    this.code = errors[0]?.extensions?.code || "";
  }
}

/** headers returns the request headers; a read key (if the server requires one) is kept in localStorage. */
function authHeader() {
  const key = localStorage.getItem("lb.readKey");
  return key ? { authorization: "Bearer " + key } : {};
}

/** query runs a query over HTTP POST and returns its data, or throws a GraphQLError or a network error. */
export async function query(endpoint, document, variables = {}, signal) {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json", ...authHeader() },
    body: JSON.stringify({ query: document, variables }),
    signal,
  });
  let body;
  try {
    body = await res.json();
  } catch {
    throw new Error(`HTTP ${res.status}`);
  }
  if (body.errors?.length) throw new GraphQLError(body.errors);
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return body.data;
}

/**
 * LiveClient keeps one graphql-transport-ws connection open while it has subscriptions.
 * onState(state, detail) is told "connecting", "connected", "reconnecting" (detail: seconds until the next
 * attempt) and "offline" (the browser has no network). onNeverOpened() is told when a websocket closed before it
 * opened: a browser does not tell a page why (a 403 for the page's origin looks like a network error).
 */
export class LiveClient {
  constructor(url, onState = () => {}, onNeverOpened = () => {}) {
    this.url = url;
    this.onState = onState;
    this.onNeverOpened = onNeverOpened;
    this.subs = new Map(); // id -> {payload, sink}
    this.nextId = 1;
    this.ws = null;
    this.acked = false;
    this.attempt = 0;
    this.retryTimer = null;
    this.pingTimer = null;
    this.lastMessage = 0;
    this.closed = false;
    window.addEventListener("online", () => this.reconnectNow());
    window.addEventListener("offline", () => this.state("offline"));
  }

  state(s, detail) {
    this.currentState = s;
    this.onState(s, detail);
  }

  /**
   * subscribe starts a subscription; sink.next(data) gets each result, sink.error(err) a GraphQLError (the
   * server ended the subscription). Returns a function that stops it.
   */
  subscribe(document, variables, sink) {
    const id = String(this.nextId++);
    this.subs.set(id, { payload: { query: document, variables }, sink });
    if (this.ws && this.acked) this.send({ id, type: "subscribe", payload: this.subs.get(id).payload });
    else this.connect();
    return () => {
      if (!this.subs.delete(id)) return;
      if (this.ws && this.acked) this.send({ id, type: "complete" });
    };
  }

  connect() {
    if (this.ws || this.retryTimer || this.closed) return;
    if (!navigator.onLine) {
      this.state("offline");
      return;
    }
    this.state("connecting");
    let ws;
    try {
      ws = new WebSocket(this.url, "graphql-transport-ws");
    } catch {
      this.scheduleRetry();
      return;
    }
    this.ws = ws;
    this.acked = false;
    let opened = false;
    ws.onopen = () => {
      opened = true;
      const key = localStorage.getItem("lb.readKey");
      this.send({ type: "connection_init", payload: key ? { authorization: "Bearer " + key } : {} });
    };
    ws.onmessage = (ev) => this.receive(ev.data);
    ws.onclose = () => {
      if (this.ws !== ws) return;
      this.ws = null;
      this.acked = false;
      clearInterval(this.pingTimer);
      this.scheduleRetry();
      if (!opened) this.onNeverOpened();
    };
  }

  receive(data) {
    let msg;
    try {
      msg = JSON.parse(data);
    } catch {
      return;
    }
    this.lastMessage = Date.now();
    switch (msg.type) {
      case "connection_ack":
        this.acked = true;
        this.attempt = 0;
        this.state("connected");
        for (const [id, s] of this.subs) this.send({ id, type: "subscribe", payload: s.payload });
        this.startPings();
        break;
      case "ping":
        this.send({ type: "pong" });
        break;
      case "next": {
        const s = this.subs.get(msg.id);
        if (!s) break;
        if (msg.payload?.errors?.length) s.sink.error(new GraphQLError(msg.payload.errors));
        else s.sink.next(msg.payload.data);
        break;
      }
      case "error": {
        const s = this.subs.get(msg.id);
        this.subs.delete(msg.id);
        s?.sink.error(new GraphQLError(Array.isArray(msg.payload) ? msg.payload : [{ message: "error" }]));
        break;
      }
      case "complete": {
        // The server ended a subscription it should not have ended (a live list has no natural end): ask again
        // a little later. If the server is shutting down, the connection closes first and the reconnection
        // subscribes again anyway.
        const s = this.subs.get(msg.id);
        if (s) {
          setTimeout(() => {
            if (this.subs.get(msg.id) === s && this.ws && this.acked) {
              this.send({ id: msg.id, type: "subscribe", payload: s.payload });
            }
          }, 2000);
        }
        break;
      }
    }
  }

  // startPings sends a ping every 15 s and drops a connection that has been silent for 25 s: a half-open TCP
  // connection (a laptop waking up, a proxy that died) would otherwise look connected forever.
  startPings() {
    clearInterval(this.pingTimer);
    this.pingTimer = setInterval(() => {
      if (!this.ws) return;
      if (Date.now() - this.lastMessage > 25000) {
        this.ws.close();
        return;
      }
      this.send({ type: "ping" });
    }, 15000);
  }

  scheduleRetry() {
    if (this.closed || this.subs.size === 0) {
      this.state("idle");
      return;
    }
    if (!navigator.onLine) {
      this.state("offline");
      return;
    }
    const wait = backoff(this.attempt++);
    const until = Date.now() + wait;
    this.state("reconnecting", Math.ceil(wait / 1000));
    const tick = () => {
      const left = until - Date.now();
      if (left <= 0) {
        this.retryTimer = null;
        this.connect();
        return;
      }
      this.state("reconnecting", Math.ceil(left / 1000));
      this.retryTimer = setTimeout(tick, Math.min(left, 1000));
    };
    this.retryTimer = setTimeout(tick, Math.min(wait, 1000));
  }

  reconnectNow() {
    clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.attempt = 0;
    if (!this.ws) this.connect();
  }

  send(msg) {
    if (this.ws?.readyState === WebSocket.OPEN) this.ws.send(JSON.stringify(msg));
  }
}
