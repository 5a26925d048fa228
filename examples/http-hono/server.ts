/** The same handler mounted in Hono (on @hono/node-server): Hono speaks the Fetch API, so no bridge is needed. */
import type { Server } from "node:http";
import { serve } from "@hono/node-server";
import { Hono } from "hono";
import { announce, createDemoApp, listenOptions, stopOnSignal } from "../http-common/demo-app.js";

const app = await createDemoApp();
const web = new Hono();
web.all("/api/*", (c) => app.handler(c.req.raw));

const { port, host } = listenOptions();
const server = serve({ fetch: web.fetch, port, hostname: host }, () => announce("http", server.address(), app));
stopOnSignal(
  () =>
    new Promise((resolve) => {
      (server as Server).closeAllConnections();
      server.close(() => resolve());
    }),
  app,
);
