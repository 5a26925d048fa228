/** One instance of the app over HTTP, with the dashboard: `PORT=3000 npx tsx server.ts` (start as many as you like). */
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { accountRoutes } from "mneme/defaults";
import { createHttpHandler, toNodeListener } from "mneme/http";
import createApp from "./app.js";

const facade = await createApp();
await facade.start();
const listener = toNodeListener(createHttpHandler(facade, { dashboard: true, modules: [accountRoutes()] }));
const server = createServer((req, res) => void listener(req, res));
server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1", () => {
  const { address, port } = server.address() as AddressInfo;
  console.log(`listening on http://${address}:${port} (dashboard: /dashboard/)`);
});

// Stop taking requests, then stop the facade: handlers hand their locks to the other instances.
const stop = () =>
  server.close(() => {
    void facade.stop().then(() => process.exit(0));
  });
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
