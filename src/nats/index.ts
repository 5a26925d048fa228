/**
 * `mneme/nats`: integration with NATS JetStream. A NatsPublisher publishes
 * chosen events (with the event uuid as `Nats-Msg-Id`, through an outbox, at
 * least once, in order per aggregate); a NatsConsumer turns the messages of a
 * durable consumer into commands (commandUuid: a uuid v5 of the message id,
 * acked once committed). Both are event handlers listed by the Runtime. Needs
 * `@nats-io/jetstream` and `@nats-io/transport-node` (optional peers). See docs/integration.md.
 */
export { NatsPublisher, type NatsPublisherOptions } from "./nats-publisher.js";
export { NatsConsumer, type NatsConsumerOptions } from "./nats-consumer.js";
