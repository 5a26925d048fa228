/**
 * The examples of dcb.events as mneme domains (dynamic consistency
 * boundaries): each decision reads the events of a query with `ctx.events`,
 * so a concurrent command that changes what it decided on makes it CONFLICT.
 * Used by the DCB conformance suite, the docs (docs/dcb.md) and the bench.
 */
import { newUuid, nowNs } from "../model/clock.js";
import { anonymous } from "../model/permission.js";
import { defineDomain, type Domain } from "../model/domain.js";
import { defineErrorCode, MnemeError } from "../model/errors.js";
import type { CommandContext } from "../model/context.js";
import type { Facade } from "../app/facade.js";

/** A rule of an example refused the command (a business refusal, not a conflict). */
export const DCB_RULE_BROKEN = defineErrorCode("DCB_RULE_BROKEN", {
  status: 422,
  description: "a rule of the decision refused the command",
});

function refuse(message: string): never {
  throw new MnemeError(DCB_RULE_BROKEN, message);
}

/** Settings of {@link dcbExamples}. */
export interface DcbExampleOptions {
  /** The most courses a student may be subscribed to at once. Default 3. */
  readonly maxCoursesPerStudent?: number;
  /** How long a price shown to a customer is honoured after it changed (ms). Default 60 000. */
  readonly priceGraceMs?: number;
  /** The clock of the price decision (ns, as event times). Default nowNs. */
  readonly now?: () => number;
}

/**
 * Fresh domains of the dcb.events examples (new objects per call, so every
 * facade of a test gets its own) and `register(facade)` that installs them.
 */
export function dcbExamples(opts: DcbExampleOptions = {}) {
  const maxCourses = opts.maxCoursesPerStudent ?? 3;
  const graceNs = (opts.priceGraceMs ?? 60_000) * 1e6;
  const clock = opts.now ?? nowNs;

  // Course subscriptions: a course's capacity and a student's number of courses, decided together.
  const Courses = defineDomain("Courses", { description: "Course subscriptions (dcb.events)" });
  const CourseDefined = Courses.event<{ courseId: string; capacity: number }>("CourseDefined", {
    tags: (p) => [`course:${p.courseId}`],
  });
  const StudentSubscribed = Courses.event<{ studentId: string; courseId: string }>("StudentSubscribed", {
    tags: (p) => [`student:${p.studentId}`, `course:${p.courseId}`],
  });
  const StudentUnsubscribed = Courses.event<{ studentId: string; courseId: string }>("StudentUnsubscribed", {
    tags: (p) => [`student:${p.studentId}`, `course:${p.courseId}`],
  });
  const DefineCourse = Courses.command<{ courseId: string; capacity: number }>("DefineCourse", { permission: anonymous });
  const Subscribe = Courses.command<{ studentId: string; courseId: string }>("Subscribe", { permission: anonymous });
  const Unsubscribe = Courses.command<{ studentId: string; courseId: string }>("Unsubscribe", { permission: anonymous });

  interface Seats {
    capacity: number | undefined;
    taken: Set<string>;
  }
  const courseSeats = (ctx: CommandContext, courseId: string) =>
    ctx.events.fold(
      { items: [{ types: [CourseDefined, StudentSubscribed, StudentUnsubscribed], tags: [`course:${courseId}`] }] },
      {
        initialState: (): Seats => ({ capacity: undefined, taken: new Set() }),
        evolve: {
          CourseDefined: (s: Seats, p: { capacity: number }) => ({ ...s, capacity: p.capacity }),
          StudentSubscribed: (s: Seats, p: { studentId: string }) => ({ ...s, taken: new Set(s.taken).add(p.studentId) }),
          StudentUnsubscribed: (s: Seats, p: { studentId: string }) => {
            const taken = new Set(s.taken);
            taken.delete(p.studentId);
            return { ...s, taken };
          },
        },
      },
    );
  const studentCourses = (ctx: CommandContext, studentId: string) =>
    ctx.events.fold(
      { items: [{ types: [StudentSubscribed, StudentUnsubscribed], tags: [`student:${studentId}`] }] },
      {
        initialState: () => new Set<string>(),
        evolve: {
          StudentSubscribed: (s: Set<string>, p: { courseId: string }) => new Set(s).add(p.courseId),
          StudentUnsubscribed: (s: Set<string>, p: { courseId: string }) => {
            const out = new Set(s);
            out.delete(p.courseId);
            return out;
          },
        },
      },
    );

  // Unique usernames: a name is taken while an account holds it, and free again once that account is closed.
  const Accounts = defineDomain("DcbAccounts", { description: "Unique usernames (dcb.events)" });
  const AccountRegistered = Accounts.event<{ accountId: string; username: string }>("AccountRegistered", {
    tags: (p) => [`username:${p.username}`, `account:${p.accountId}`],
  });
  const AccountClosed = Accounts.event<{ accountId: string; username: string }>("AccountClosed", {
    tags: (p) => [`username:${p.username}`, `account:${p.accountId}`],
  });
  const Register = Accounts.command<{ accountId: string; username: string }>("Register", { permission: anonymous });
  const CloseAccount = Accounts.command<{ accountId: string }>("CloseAccount", { permission: anonymous });

  // Invoice numbers: consecutive, without gaps, decided from the last invoice (a query by type alone).
  const Invoices = defineDomain("DcbInvoices", { description: "Consecutive invoice numbers (dcb.events)" });
  const InvoiceCreated = Invoices.event<{ invoiceNumber: number; amount: number }>("InvoiceCreated", {
    tags: (p) => [`invoice:${p.invoiceNumber}`],
  });
  const CreateInvoice = Invoices.command<{ amount: number }, { invoiceNumber: number }>("CreateInvoice", { permission: anonymous });

  // Opt-in tokens: a token confirms a sign-up once.
  const OptIn = defineDomain("DcbOptIn", { description: "Opt-in tokens used once (dcb.events)" });
  const SignUpInitiated = OptIn.event<{ subscriberId: string; token: string }>("SignUpInitiated", { tags: (p) => [`token:${p.token}`] });
  const SignUpConfirmed = OptIn.event<{ subscriberId: string; token: string }>("SignUpConfirmed", { tags: (p) => [`token:${p.token}`] });
  const InitiateSignUp = OptIn.command<{ subscriberId: string; token: string }>("InitiateSignUp", { permission: anonymous });
  const ConfirmSignUp = OptIn.command<{ token: string }>("ConfirmSignUp", { permission: anonymous });

  // Prices honoured for a while: an order at a price shown before it changed is accepted within the grace period.
  const Shop = defineDomain("DcbShop", { description: "Prices honoured for a while (dcb.events)" });
  const ProductDefined = Shop.event<{ productId: string; price: number }>("ProductDefined", { tags: (p) => [`product:${p.productId}`] });
  const PriceChanged = Shop.event<{ productId: string; price: number }>("PriceChanged", { tags: (p) => [`product:${p.productId}`] });
  const ProductOrdered = Shop.event<{ productId: string; price: number }>("ProductOrdered", { tags: (p) => [`product:${p.productId}`] });
  const DefineProduct = Shop.command<{ productId: string; price: number }>("DefineProduct", { permission: anonymous });
  const ChangePrice = Shop.command<{ productId: string; price: number }>("ChangePrice", { permission: anonymous });
  const OrderProduct = Shop.command<{ productId: string; displayedPrice: number }>("OrderProduct", { permission: anonymous });

  const register = (facade: Facade): void => {
    facade.registerDomain(Courses, (d) => {
      d.handleCommand(DefineCourse, async (ctx, _c, p) => {
        const { state } = await courseSeats(ctx, p.courseId);
        if (state.capacity !== undefined) refuse(`course ${p.courseId} exists already`);
        return [CourseDefined.create(newUuid(), p)];
      });
      d.handleCommand(Subscribe, async (ctx, _c, p) => {
        const [{ state: seats }, { state: courses }] = await Promise.all([courseSeats(ctx, p.courseId), studentCourses(ctx, p.studentId)]);
        if (seats.capacity === undefined) refuse(`course ${p.courseId} does not exist`);
        if (seats.taken.has(p.studentId)) refuse(`student ${p.studentId} is subscribed to course ${p.courseId} already`);
        if (seats.taken.size >= seats.capacity) refuse(`course ${p.courseId} is full (${seats.capacity} seats)`);
        if (courses.size >= maxCourses) refuse(`student ${p.studentId} is subscribed to ${maxCourses} courses already`);
        return [StudentSubscribed.create(newUuid(), p)];
      });
      d.handleCommand(Unsubscribe, async (ctx, _c, p) => {
        const { state: courses } = await studentCourses(ctx, p.studentId);
        if (!courses.has(p.courseId)) refuse(`student ${p.studentId} is not subscribed to course ${p.courseId}`);
        return [StudentUnsubscribed.create(newUuid(), p)];
      });
    });
    facade.registerDomain(Accounts, (d) => {
      d.handleCommand(Register, async (ctx, _c, p) => {
        const { events } = await ctx.events.read({
          items: [{ types: [AccountRegistered, AccountClosed], tags: [`username:${p.username}`] }],
        });
        const last = events[events.length - 1];
        if (last !== undefined && AccountRegistered.is(last)) refuse(`username ${p.username} is taken`);
        return [AccountRegistered.create(p.accountId, p)];
      });
      d.handleCommand(CloseAccount, async (ctx, _c, p) => {
        const { events } = await ctx.events.read({
          items: [{ types: [AccountRegistered, AccountClosed], tags: [`account:${p.accountId}`] }],
        });
        const last = events[events.length - 1];
        if (last === undefined || !AccountRegistered.is(last)) refuse(`account ${p.accountId} is not open`);
        return [AccountClosed.create(p.accountId, { accountId: p.accountId, username: last.payload.username })];
      });
    });
    facade.registerDomain(Invoices, (d) => {
      d.handleCommand(CreateInvoice, async (ctx, _c, p) => {
        const { state: last } = await ctx.events.fold(
          { items: [{ types: [InvoiceCreated] }] },
          { initialState: () => 0, evolve: { InvoiceCreated: (_s: number, e: { invoiceNumber: number }) => e.invoiceNumber } },
        );
        const invoiceNumber = last + 1;
        return { events: [InvoiceCreated.create(newUuid(), { invoiceNumber, amount: p.amount })], result: { invoiceNumber } };
      });
    });
    facade.registerDomain(OptIn, (d) => {
      d.handleCommand(InitiateSignUp, (_ctx, _c, p) => [SignUpInitiated.create(newUuid(), p)]);
      d.handleCommand(ConfirmSignUp, async (ctx, _c, p) => {
        const { events } = await ctx.events.read({ items: [{ types: [SignUpInitiated, SignUpConfirmed], tags: [`token:${p.token}`] }] });
        const initiated = events.find((e) => SignUpInitiated.is(e));
        if (initiated === undefined || !SignUpInitiated.is(initiated)) refuse(`token ${p.token} is unknown`);
        if (events.some((e) => SignUpConfirmed.is(e))) refuse(`token ${p.token} was used already`);
        return [SignUpConfirmed.create(newUuid(), { subscriberId: initiated.payload.subscriberId, token: p.token })];
      });
    });
    facade.registerDomain(Shop, (d) => {
      const prices = (ctx: CommandContext, productId: string) =>
        ctx.events.read({ items: [{ types: [ProductDefined, PriceChanged], tags: [`product:${productId}`] }] });
      d.handleCommand(DefineProduct, async (ctx, _c, p) => {
        if ((await prices(ctx, p.productId)).events.length > 0) refuse(`product ${p.productId} exists already`);
        return [ProductDefined.create(newUuid(), p)];
      });
      d.handleCommand(ChangePrice, async (ctx, _c, p) => {
        if ((await prices(ctx, p.productId)).events.length === 0) refuse(`product ${p.productId} does not exist`);
        return [PriceChanged.create(newUuid(), p)];
      });
      d.handleCommand(OrderProduct, async (ctx, _c, p) => {
        const { events } = await prices(ctx, p.productId);
        const current = events[events.length - 1];
        if (current === undefined) refuse(`product ${p.productId} does not exist`);
        // Honoured: the current price, or a price that stopped being current less than the grace period ago.
        const now = clock();
        const honoured = events.some((e, i) => {
          const price = (e.payload as { price: number }).price;
          if (price !== p.displayedPrice) return false;
          const next = events[i + 1];
          return next === undefined || now - next.createdAt <= graceNs;
        });
        if (!honoured) refuse(`price ${p.displayedPrice} of product ${p.productId} is not valid (any more)`);
        return [ProductOrdered.create(newUuid(), { productId: p.productId, price: p.displayedPrice })];
      });
    });
  };

  return {
    register,
    domains: [Courses, Accounts, Invoices, OptIn, Shop] as readonly Domain[],
    events: {
      CourseDefined,
      StudentSubscribed,
      StudentUnsubscribed,
      AccountRegistered,
      AccountClosed,
      InvoiceCreated,
      SignUpInitiated,
      SignUpConfirmed,
      ProductDefined,
      PriceChanged,
      ProductOrdered,
    },
    commands: {
      DefineCourse,
      Subscribe,
      Unsubscribe,
      Register,
      CloseAccount,
      CreateInvoice,
      InitiateSignUp,
      ConfirmSignUp,
      DefineProduct,
      ChangePrice,
      OrderProduct,
    },
  };
}

/** What {@link dcbExamples} returns. */
export type DcbExamples = ReturnType<typeof dcbExamples>;
