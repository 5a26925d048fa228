/**
 * The web-client example's server: the app over node:http (createHttpHandler +
 * toNodeListener) and the page of public/ beside it, on one origin.
 *
 *   npx tsx src/cli/main.ts seed --app examples/web-client/app.ts --file examples/web-client/seed.json
 *   npx tsx examples/web-client/server.ts        # PORT (3000), HOST (127.0.0.1), BOARD_DB
 *
 * The page imports the generated client, client.ts. A browser runs no
 * TypeScript, so the server erases its types once at start with the
 * `typescript` package (transpileModule: no type check, no bundling; the file
 * imports nothing) and serves the JavaScript as /client.js. An app with a
 * build step compiles client.ts with the rest of its front end instead.
 */
import { readFileSync } from "node:fs";
import { type IncomingMessage, type ServerResponse, createServer } from "node:http";
import type { AddressInfo } from "node:net";
import ts from "typescript";
import { createHttpHandler, toNodeListener } from "mneme/http";
import createApp, { httpOptions } from "./app.js";

const here = new URL(".", import.meta.url);
const read = (file: string) => readFileSync(new URL(file, here), "utf8");

const JS = "text/javascript; charset=utf-8";
/** The page's files by path: the only paths served besides the API. */
const files = new Map<string, { type: string; body: string }>([
  ["/", { type: "text/html; charset=utf-8", body: read("public/index.html") }],
  ["/app.js", { type: JS, body: read("public/app.js") }],
  ["/style.css", { type: "text/css; charset=utf-8", body: read("public/style.css") }],
  [
    "/client.js",
    {
      type: JS,
      body: ts.transpileModule(read("client.ts"), { compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext } })
        .outputText,
    },
  ],
]);
/** Scripts, styles and requests from this origin only; no inline script. */
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

const facade = await createApp();
await facade.start();
const api = toNodeListener(createHttpHandler(facade, httpOptions));

function servePage(req: IncomingMessage, res: ServerResponse): boolean {
  if (req.method !== "GET" && req.method !== "HEAD") return false;
  const file = files.get(new URL(req.url ?? "/", "http://x").pathname);
  if (file === undefined) return false;
  res.writeHead(200, {
    "content-type": file.type,
    "cache-control": "no-cache",
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
  });
  res.end(req.method === "HEAD" ? undefined : file.body);
  return true;
}

const server = createServer((req, res) => {
  if (!servePage(req, res)) void api(req, res);
});
server.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1", () => {
  const { address, port } = server.address() as AddressInfo;
  console.log(`listening on http://${address}:${port}`);
});

// Stop taking requests, end the open event streams (a browser reconnects elsewhere and resumes), then stop the facade.
const stop = () => {
  server.close(() => void facade.stop().then(() => process.exit(0)));
  server.closeAllConnections();
};
process.once("SIGTERM", stop);
process.once("SIGINT", stop);
