/**
 * The dashboard's entry point: sign-in, then the shell (navigation, the live
 * stream's status, sign-out) and one page per hash route. Served from
 * `<basePath>/dashboard/`, so the API's root is the folder above.
 */
import { Api } from "./api.js";
import { App } from "./app.js";
import { fill, h } from "./dom.js";
import type { Session } from "./types.js";
import { badge } from "./ui.js";
import { catalogView } from "./views/catalog.js";
import { deadLettersView } from "./views/dead-letters.js";
import { handlersView } from "./views/handlers.js";
import { overviewView } from "./views/overview.js";
import { scheduledView } from "./views/scheduled.js";
import { signInView } from "./views/signin.js";
import { storesView } from "./views/stores.js";
import { streamView } from "./views/stream.js";
import type { View, ViewContext } from "./views/view.js";

const ROUTES = [
  { path: "overview", title: "Overview", icon: "◎", view: overviewView },
  { path: "handlers", title: "Event handlers", icon: "⇄", view: handlersView },
  { path: "stream", title: "Live events", icon: "≋", view: streamView },
  { path: "dead-letters", title: "Dead letters", icon: "✉", view: deadLettersView },
  { path: "scheduled", title: "Scheduled", icon: "◷", view: scheduledView },
  { path: "catalog", title: "Catalog", icon: "☰", view: catalogView },
  { path: "stores", title: "Stores", icon: "▤", view: storesView },
] as const;

const root = document.getElementById("app")!;
const api = new Api(new URL("../", location.href.split("#")[0]));
let app: App | undefined;
let current: View | undefined;

api.onSessionEnded = (detail) => signOut(`Your session ended: ${detail}`);

function start(): void {
  if (api.session === undefined) showSignIn("");
  else showShell();
}

function showSignIn(notice: string): void {
  fill(
    root,
    signInView(api, notice, (s: Session) => {
      api.session = s;
      if (!location.hash.startsWith("#/")) location.hash = "#/overview";
      showShell();
    }),
  );
}

function signOut(notice: string): void {
  const wasSignedIn = api.session !== undefined;
  if (wasSignedIn) void api.request("DELETE", "api/sessions/current").catch(() => undefined);
  api.session = undefined;
  current?.dispose();
  current = undefined;
  app?.stop();
  app = undefined;
  showSignIn(notice);
}

function showShell(): void {
  app?.stop();
  const a = new App(api);
  app = a;
  const session = api.session!;
  const nav = h("nav", { class: "nav" });
  const content = h("div", { class: "content" });
  const title = h("h1", null);
  const pill = h("span", { class: "pill" });
  const ctx: ViewContext = { app: a, api };

  const renderPill = () => {
    pill.setAttribute("data-stream-status", a.streamStatus);
    fill(pill, "Live stream ", badge(a.streamStatus));
  };
  a.on("status", renderPill);
  renderPill();

  fill(
    root,
    h(
      "div",
      { class: "shell" },
      h(
        "aside",
        { class: "sidebar" },
        h("div", { class: "brand" }, h("span", { class: "logo" }), h("span", null, "mneme"), h("small", null, "Runtime")),
        nav,
        h(
          "div",
          { class: "who" },
          h("div", { class: "who-email", title: session.accountUuid }, session.email),
          h("div", { class: "who-tenant", title: session.tenantUuid }, session.tenantName),
          h(
            "button",
            { type: "button", class: "small ghost", "data-action": "sign-out", onclick: () => signOut("Signed out.") },
            "Sign out",
          ),
        ),
      ),
      h("main", { class: "main" }, h("header", { class: "topbar" }, title, h("div", { class: "spacer" }), pill), content),
    ),
  );

  const route = () => {
    const path = location.hash.replace(/^#\//, "") || "overview";
    const r = ROUTES.find((x) => x.path === path) ?? ROUTES[0];
    fill(
      nav,
      ROUTES.map((x) =>
        h("a", { href: `#/${x.path}`, class: x === r ? "active" : "", "data-nav": x.path }, h("span", { class: "icon" }, x.icon), x.title),
      ),
    );
    title.textContent = r.title;
    document.title = `${r.title} · mneme Runtime`;
    current?.dispose();
    current = r.view(ctx);
    fill(content, current.el);
  };
  window.onhashchange = route;
  route();
  a.start();
}

start();
