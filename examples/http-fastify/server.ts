/** The same handler mounted in Fastify 5: mneme gets the raw request (body unread) and the raw response. */
import Fastify from "fastify";
import { toNodeListener } from "mneme/http";
import { announce, createDemoApp, listenOptions, stopOnSignal } from "../http-common/demo-app.js";

const app = await createDemoApp();
const mneme = toNodeListener(app.handler);
// Event streams are long-lived: close them too when the server stops.
const web = Fastify({ forceCloseConnections: true });
// Leave every body to mneme (it enforces its own size limit and content type).
web.removeAllContentTypeParsers();
web.addContentTypeParser("*", (_req, _payload, done) => done(null));
web.all("/api/*", (req, reply) => {
  reply.hijack();
  return mneme(req.raw, reply.raw);
});

const { port, host } = listenOptions();
await web.listen({ port, host });
announce("http", web.server.address(), app);
stopOnSignal(() => web.close(), app);
