/**
 * The id of an AMQP message without `message-id`: derived from everything an
 * AmqpConsumer hands toCommand (routing key, the publisher's headers, body),
 * so two messages are one command exactly when they are identical in that,
 * whatever RabbitMQ added on the way (a quorum queue's delivery count,
 * dead-lettering); a header-less message keeps the id of earlier releases.
 */
import { createHash } from "node:crypto";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { derivedMessageId, messageId } from "../../src/amqp/amqp-consumer.js";

/** A message as toCommand sees it, and what RabbitMQ may have added to its headers. */
const message = fc.record({
  // Small alphabets: equal draws are frequent, so both sides of "iff" are tried.
  routingKey: fc.constantFrom("orders", "orders.placed", "a\nb", "a", ""),
  headers: fc.dictionary(fc.constantFrom("tenant", "user", "x-tenant", "Tenant", "trace"), fc.constantFrom("T1", "T2", "", "1")),
  body: fc.constantFrom("{}", '{"n":1}', "b\n{}", '"x"'),
  added: fc.dictionary(
    fc.constantFrom("x-delivery-count", "x-death", "x-first-death-queue", "x-last-death-reason", "x-received-from"),
    fc.constantFrom("1", "2", "[]"),
  ),
});
type Message = typeof message extends fc.Arbitrary<infer M> ? M : never;

const idOf = (m: Message) => derivedMessageId(m.routingKey, { ...m.headers, ...m.added }, Buffer.from(m.body));
const sameRequest = (a: Message, b: Message) =>
  a.routingKey === b.routingKey &&
  a.body === b.body &&
  JSON.stringify(Object.entries(a.headers).sort()) === JSON.stringify(Object.entries(b.headers).sort());

describe("the id of an AMQP message without message-id", () => {
  it("two messages collapse exactly when routing key, headers (besides the broker's) and body are equal", () => {
    fc.assert(
      fc.property(message, message, (a, b) => {
        expect(idOf(a) === idOf(b)).toBe(sameRequest(a, b));
      }),
      { numRuns: 3000 },
    );
  });

  it("a header-less message keeps the id of earlier releases (in flight across an upgrade)", () => {
    const body = Buffer.from('{"n":1}');
    const earlier = `sha256:${createHash("sha256").update("orders").update("\n").update(body).digest("hex")}`;
    expect(derivedMessageId("orders", {}, body)).toBe(earlier);
    expect(derivedMessageId("orders", { "x-delivery-count": "3" }, body)).toBe(earlier);
  });

  it("the tenant header of the issue's reproduction makes two commands; the message-id, when given, wins", () => {
    const props = (headers: Record<string, unknown>, id?: string) => ({
      fields: { routingKey: "orders" },
      properties: { headers, messageId: id },
      content: Buffer.from("{}"),
    });
    const t1 = messageId(props({ tenant: "T1" }) as never);
    const t2 = messageId(props({ tenant: "T2" }) as never);
    expect(t1).not.toBe(t2);
    expect(messageId(props({ tenant: "T1" }) as never)).toBe(t1);
    expect(messageId(props({ tenant: "T1" }, "given") as never)).toBe("given");
  });
});
