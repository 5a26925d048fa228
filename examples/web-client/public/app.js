// The ticket board's page: plain ES module, no bundler, no framework.
// Commands go through the generated typed client (client.ts, served as /client.js);
// the open tickets and the event feed come over two EventSources.
import { createClient } from "./client.js";

const $ = (id) => document.getElementById(id);
/** Who is signed in ({ email, tenantUuid, identityUuid }): kept for this tab; the session itself is the HttpOnly cookie. */
const SIGN_IN = "board.signIn";
const TYPES = "Board.TicketOpened,Board.TicketClosed";
/** Sources open for the signed-in user, closed on sign-out. */
let sources = [];

function load(key) {
  const text = sessionStorage.getItem(key);
  return text === null ? undefined : JSON.parse(text);
}

function showSignIn(message = "") {
  for (const s of sources) s.close();
  sources = [];
  $("board").hidden = true;
  $("sign-in").hidden = false;
  $("sign-in-problem").textContent = message;
}

$("sign-in").addEventListener("submit", async (e) => {
  e.preventDefault();
  const form = new FormData(e.target);
  const email = String(form.get("email"));
  // Sets the session and identity cookies (sessionCookies on the server): the EventSources send them.
  const r = await fetch("/api/sessions", {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ email, password: form.get("password") }),
  });
  const body = await r.json();
  if (r.status !== 201) return showSignIn(body.detail ?? `sign-in failed (${r.status})`);
  const identity = body.identities[0];
  if (identity === undefined) return showSignIn("this account has no identity in a tenant");
  const signIn = { email, tenantUuid: identity.tenantUuid, identityUuid: identity.identityUuid };
  sessionStorage.setItem(SIGN_IN, JSON.stringify(signIn));
  showBoard(signIn);
});

$("sign-out").addEventListener("click", async () => {
  // Cookie-authenticated and state-changing: the browser's Origin header passes the server's CSRF check.
  await fetch("/api/sessions/current", { method: "DELETE" });
  sessionStorage.clear();
  showSignIn();
});

function showBoard(signIn) {
  $("sign-in").hidden = true;
  $("board").hidden = false;
  $("who").textContent = signIn.email;
  // Same origin: fetch sends the cookies; "include" also makes the client send an Idempotency-Key per command.
  const client = createClient({
    baseUrl: location.origin,
    tenantUuid: signIn.tenantUuid,
    identityUuid: signIn.identityUuid,
    credentials: "include",
  });
  const tenantPath = `/api/tenants/${encodeURIComponent(signIn.tenantUuid)}`;

  const problem = (r) => ($("board-problem").textContent = r.ok ? "" : `${r.problem.code}: ${r.problem.detail}`);
  $("open-ticket").onsubmit = async (e) => {
    e.preventDefault();
    const input = e.target.elements.title;
    const r = await client.commands.Board.OpenTicket({ ticketUuid: crypto.randomUUID(), title: input.value });
    problem(r);
    if (r.ok) input.value = "";
  };
  const close = async (ticketUuid) => problem(await client.commands.Board.CloseTicket({ ticketUuid }));

  // The live query: its result at once, then again whenever the OpenTickets readmodel changes it.
  const live = new EventSource(`${tenantPath}/queries/Board/ListOpenTickets/live?payload=${encodeURIComponent("{}")}`);
  live.onopen = () => ($("tickets-state").textContent = "live");
  live.onmessage = (e) => renderTickets(JSON.parse(e.data).tickets, close);
  live.addEventListener("error", (e) => stopped(live, "tickets-state", e));

  // The feed: stored events of the two types, resumed after the last one this tab saw.
  const feedKey = `board.feed.${signIn.tenantUuid}`;
  const feed = load(feedKey) ?? { after: 0, items: [] };
  renderFeed(feed.items);
  const events = new EventSource(`${tenantPath}/events/stream?types=${TYPES}&after=${feed.after}`);
  events.onopen = () => ($("feed-state").textContent = "live");
  events.onmessage = (e) => {
    const event = JSON.parse(e.data);
    feed.items.push({ position: event.position, name: event.name, ticketUuid: event.aggregateUuid, title: event.payload.title });
    feed.after = event.position;
    sessionStorage.setItem(feedKey, JSON.stringify(feed));
    renderFeed(feed.items);
  };
  // The server could not continue from our position (another store, a restored backup): what we show may miss events.
  events.addEventListener("gap", (e) => {
    feed.items = [];
    feed.after = Number(e.lastEventId);
    sessionStorage.setItem(feedKey, JSON.stringify(feed));
    renderFeed(feed.items);
    $("feed-state").textContent = "live (earlier events are not available)";
  });
  events.addEventListener("error", (e) => stopped(events, "feed-state", e));
  sources = [live, events];
}

/**
 * An EventSource error: the server's `event: error` (data { code, message }: a permission withdrawn, a session
 * ended), a refusal on opening (then the browser gives up: readyState CLOSED), or a dropped connection (it reconnects).
 */
function stopped(source, stateId, e) {
  const ended = typeof e.data === "string" ? JSON.parse(e.data) : undefined;
  if (ended !== undefined || source.readyState === EventSource.CLOSED) {
    source.close();
    if (ended?.code === "UNAUTHENTICATED" || ended === undefined) return showSignIn("signed out: sign in again");
    $(stateId).textContent = `stopped: ${ended.code}`;
    return;
  }
  $(stateId).textContent = "reconnecting";
}

function renderTickets(tickets, close) {
  $("tickets").replaceChildren(
    ...tickets.map((t) => {
      const li = document.createElement("li");
      li.dataset.ticket = t.ticketUuid;
      li.append(t.title);
      const button = document.createElement("button");
      button.type = "button";
      button.textContent = "Close";
      button.onclick = () => close(t.ticketUuid);
      li.append(button);
      return li;
    }),
  );
}

function renderFeed(items) {
  $("feed").replaceChildren(
    ...items.map((item) => {
      const li = document.createElement("li");
      li.dataset.position = String(item.position);
      li.dataset.ticket = item.ticketUuid;
      li.textContent = `#${item.position} ${item.name} ${item.title ?? item.ticketUuid.slice(-12)}`;
      return li;
    }),
  );
}

const signedIn = load(SIGN_IN);
if (signedIn === undefined) showSignIn();
else showBoard(signedIn);
