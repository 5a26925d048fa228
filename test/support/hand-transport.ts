/** A broker's subscription driven by a test: each message is handed over by `deliver`, acked in memory. */
import type { ConsumeTransport, DeliveredMessage } from "../../src/integration/integration-transport.js";

export class HandTransport implements ConsumeTransport {
  readonly broker = "hand";
  readonly target = "lend-queue";
  connected = false;
  #handle: ((m: DeliveredMessage) => Promise<void>) | undefined;
  #open!: () => void;
  readonly opened = new Promise<void>((resolve) => (this.#open = resolve));

  open(handle: (m: DeliveredMessage) => Promise<void>): Promise<void> {
    this.#handle = handle;
    this.connected = true;
    this.#open();
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.connected = false;
    return Promise.resolve();
  }

  lag(): Promise<number | undefined> {
    return Promise.resolve(0);
  }

  deliver(id: string, body: unknown): Promise<void> {
    return this.#handle!({
      id,
      subject: "lend",
      headers: {},
      data: new TextEncoder().encode(JSON.stringify(body)),
      deliveryCount: 1,
      ack: () => Promise.resolve(),
      release: () => undefined,
      working: () => undefined,
    });
  }
}
