/**
 * The Todo demo in NestJS 11 (Express adapter): a module that provides the
 * mneme facade (MnemeService), a controller that dispatches the Todo domain's
 * commands and queries (TodosController), and mneme's own HTTP handler under
 * /mneme in the same app (login, the Runtime, the generic command and query routes).
 *
 *   npx tsx examples/nestjs/main.ts
 *   PORT (default 3000, 0 = any free port), HOST (default 127.0.0.1),
 *   MNEME_ADMIN_EMAIL / MNEME_ADMIN_PASSWORD (the first administrator), MNEME_DB (a SQLite file)
 *
 * Decorators: Nest's are TypeScript's legacy decorators (`experimentalDecorators`,
 * set in the repository's tsconfig.json). tsx compiles with esbuild, which does
 * not emit `emitDecoratorMetadata`'s design types, so injection names its
 * token (`@Inject(MnemeService)`) instead of relying on the parameter's type.
 */
import "reflect-metadata";
import { NestFactory } from "@nestjs/core";
import type { NestExpressApplication } from "@nestjs/platform-express";
import { AppModule } from "./app.module.js";
import { MNEME_BASE_PATH, MnemeService } from "./mneme.service.js";

// forceCloseConnections: open event streams (GET .../runtime/sse) must not hold the shutdown up.
const app = await NestFactory.create<NestExpressApplication>(AppModule, { forceCloseConnections: true, logger: ["error", "warn"] });
const mneme = app.get(MnemeService);
// mneme reads the request body itself (its own size limit and content types): this route is registered on Express
// now, before Nest adds its body parser on init, and hands node's request and response to the handler's direct path.
app
  .getHttpAdapter()
  .getInstance()
  .all(`${MNEME_BASE_PATH}/*rest`, (req, res, next) => void mneme.listener(req, res).catch(next));
app.enableShutdownHooks();

await app.listen(Number(process.env.PORT ?? 3000), process.env.HOST ?? "127.0.0.1");
const where = await app.getUrl();
console.log(`listening on ${where}`);
console.log(`system tenant ${mneme.systemTenantUuid}; log in with POST ${where}${MNEME_BASE_PATH}/api/sessions {"email","password"}`);
