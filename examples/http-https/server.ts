/**
 * The demo over HTTPS with node:https (the spec asks runtime endpoints to be
 * served over HTTPS). TLS_KEY_FILE and TLS_CERT_FILE name PEM files, e.g. from
 *   openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 7 -subj /CN=localhost
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import { toNodeListener } from "mneme/http";
import { announce, createDemoApp, listenOptions, stopOnSignal } from "../http-common/demo-app.js";

const keyFile = process.env.TLS_KEY_FILE;
const certFile = process.env.TLS_CERT_FILE;
if (!keyFile || !certFile) {
  console.error("set TLS_KEY_FILE and TLS_CERT_FILE to PEM files (see the comment at the top of this file)");
  process.exit(2);
}
const app = await createDemoApp();
const nodeListener = toNodeListener(app.handler);
const server = createServer({ key: readFileSync(keyFile), cert: readFileSync(certFile) }, (req, res) => void nodeListener(req, res));
const { port, host } = listenOptions();
server.listen(port, host, () => announce("https", server.address(), app));
stopOnSignal(
  () =>
    new Promise((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  app,
);
