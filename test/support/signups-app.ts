/**
 * The Signups domain of test/privacy/privacy-migration.int.test.ts (an e-mail that
 * was not declared personal data at first), and, as the default export, its
 * app on the SQLite file named by SIGNUPS_FILE with the e-mail declared: the
 * `--app` module the test gives `mneme privacy check|migrate`.
 */
import { anonymous, createFacade, defineDomain, type Facade } from "mneme";
import { createSqliteBackends } from "mneme/sqlite";

export interface Signup {
  personUuid: string;
  email: string;
  plan: string;
}

/** The Signups domain, with or without its personal data declared. */
export function signups(declared: boolean) {
  const D = defineDomain("Signups");
  const personal = declared ? { personalData: { subject: (p: Signup) => p.personUuid, fields: ["email"] } } : {};
  const SignUp = D.command<Signup>("SignUp", { permission: anonymous, ...personal });
  const SignedUp = D.event<Signup>("SignedUp", personal);
  D.handleCommand(SignUp, (_ctx, _c, p) => [SignedUp.create(p.personUuid, p)]);
  return { D, SignUp, SignedUp };
}

export default function createApp(): Facade {
  const filename = process.env.SIGNUPS_FILE;
  if (filename === undefined) throw new Error("SIGNUPS_FILE is not set");
  const facade = createFacade({ appName: "signups", ...createSqliteBackends({ filename }) });
  facade.registerDomain(signups(true).D);
  return facade;
}
