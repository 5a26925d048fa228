/** The same handler mounted in Express 5 (mount it before any body parser: mneme reads the body itself). */
import express from "express";
import { toNodeListener } from "mneme/http";
import { announce, createDemoApp, listenOptions, stopOnSignal } from "../http-common/demo-app.js";

const app = await createDemoApp();
const mneme = toNodeListener(app.handler);
const web = express();
web.all("/api/*rest", (req, res, next) => void mneme(req, res).catch(next));
web.get("/", (_req, res) => void res.send("todo demo: the API is under /api"));

const { port, host } = listenOptions();
const server = web.listen(port, host, () => announce("http", server.address(), app));
stopOnSignal(
  () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  app,
);
