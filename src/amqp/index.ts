/**
 * `mneme/amqp`: integration with RabbitMQ (AMQP 0-9-1). An AmqpPublisher
 * publishes chosen events (persistent, the event uuid as `message-id`, on a
 * confirm channel, through an outbox, at least once, in order per
 * aggregate); an AmqpConsumer turns the messages of a queue into commands
 * (commandUuid: a uuid v5 of the message id, acked once committed), which is
 * how repeats are dropped: RabbitMQ itself keeps none out. Both are event
 * handlers listed by the Runtime. Needs `amqplib` 2.x (an optional peer). See docs/integration.md.
 */
export { AmqpPublisher, type AmqpPublisherOptions } from "./amqp-publisher.js";
export { AmqpConsumer, type AmqpBinding, type AmqpConsumerOptions } from "./amqp-consumer.js";
export type { AmqpConnectionLike } from "./amqp-driver.js";
