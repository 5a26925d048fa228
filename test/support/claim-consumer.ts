/**
 * The consumer of test/integration/consumer-dead-claim.int.test.ts, the same in the test
 * and in its child process: each message `{ accountUuid, amount }` becomes a
 * Charge (of claims-domain), retried at most twice (`retry.maxAttempts: 2`).
 */
import type { Facade } from "mneme";
import { AmqpConsumer } from "mneme/amqp";
import { NatsConsumer, type NatsConsumerOptions } from "mneme/nats";
import { Charge } from "./claims-domain.js";

export const CONSUMER = "ChargesIn";
const reqCtx = { senderAccountUuid: "acc-k", senderSessionUuid: "s-k", senderIdentityUuid: "i-k", senderTenantUuid: "tenant-k" };

export function claimConsumer(facade: Facade, broker: "amqp" | "nats", connection: unknown, source: string): AmqpConsumer | NatsConsumer {
  const common = {
    name: CONSUMER,
    domain: "Claims",
    retry: { maxAttempts: 2, initialDelayMs: 50, maxDelayMs: 200 },
    toCommand: (m: { body: unknown }) => ({ command: Charge, payload: m.body as { accountUuid: string; amount: number }, reqCtx }),
  };
  return broker === "amqp"
    ? new AmqpConsumer(facade, { ...common, connection: connection as string, queue: source })
    : new NatsConsumer(facade, {
        ...common,
        connection: connection as NatsConsumerOptions["connection"],
        stream: source,
        durable: "charges",
        ackWaitMs: 1000,
      });
}
