import { createFacade } from "./src/core/facade.js";
import { defineDomain } from "./src/core/domain.js";
import { MemoryCommandStore } from "./src/memory/memory-command-store.js";
const Items = defineDomain("Items");
const ItemCreated = Items.event<{ title: string }>("ItemCreated");
const CreateItem = Items.command<{ itemUuid: string; title: string }>("CreateItem");
Items.handleCommand(CreateItem, (_c, _m, p) => [ItemCreated.create(p.itemUuid, { title: p.title })]);
const reqCtx = { senderAccountUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ab", senderSessionUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ac", senderIdentityUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ad", senderTenantUuid: "0190a7a2-7d3c-7b5e-9f00-1234567890ae", traceId: "4bf92f3577b34da6a3ce929d0e0e4736" };
class NoopCommandStore extends MemoryCommandStore { override async record(): Promise<void> {} }
const n = Number(process.argv[2] ?? 300000);
for (const [name, cs] of [["noop command store", () => new NoopCommandStore()], ] as const) {
  for (let r = 0; r < 2; r++) {
    const f = createFacade({ commandStore: cs() }).registerDomain(Items); await f.start();
    const c0 = process.cpuUsage();
    for (let i = 0; i < n; i++) await f.dispatch(CreateItem, { itemUuid: `id-${i % 10000}`, title: "x" }, { reqCtx });
    const c = process.cpuUsage(c0);
    console.log(`dispatch (${name}) cpu µs/op`, ((c.user + c.system) / n).toFixed(2));
    await f.stop();
  }
}
