/** The demo over plain node:http: `npx tsx examples/http-node/server.ts`. */
import { createServer } from "node:http";
import { toNodeListener } from "mneme/http";
import { announce, createDemoApp, listenOptions, stopOnSignal } from "../http-common/demo-app.js";

const app = await createDemoApp();
const nodeListener = toNodeListener(app.handler);
const server = createServer((req, res) => void nodeListener(req, res));
const { port, host } = listenOptions();
server.listen(port, host, () => announce("http", server.address(), app));
stopOnSignal(
  () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  app,
);
