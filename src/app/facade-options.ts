/** The options of createFacade. */
import type { Authorizer } from "../permissions/permission-registry.js";
import type { DeliveryOptions } from "../readmodel/handler-runner.js";
import type { SystemEventProducerOptions } from "../runtime/system-events.js";
import type { JsonSchema } from "../model/types.js";
import type { AggregateCacheOptions } from "./aggregate-cache.js";
import type { EventQueryCacheOptions } from "./event-query-cache.js";
import type { IdempotencyOptions } from "./command-claim.js";
import type { BackendChoice } from "./backend-choice.js";

/** Options of createFacade. Every store defaults to its in-memory implementation. */
export interface FacadeOptions extends BackendChoice {
  readonly appName?: string;
  readonly version?: string;
  /** The tenant this instance serves, when it serves one (shown in systemInfo). */
  readonly tenant?: string;
  readonly instanceId?: string;
  /** The key cache of personal data: keys held (default 10,000) and how long one is used before the store is asked again (ms, default 5,000). */
  readonly personalData?: {
    readonly keyCacheSize?: number;
    readonly keyCacheTtlMs?: number;
    /** Events of declared types the start-up check for personal data stored in clear reads at most (default 10,000; 0: no check). */
    readonly startupCheckLimit?: number;
  };
  /** Output of `mneme schema build`: the object, or the path of its file. */
  readonly schemas?: JsonSchema | string;
  readonly authorizer?: Authorizer;
  /** true: facade.start() starts the system-event producer. */
  readonly systemEvents?: boolean | SystemEventProducerOptions;
  /** Replay batch size and catch buffer bound of every handler (readmodels may override). */
  readonly delivery?: Partial<DeliveryOptions>;
  /**
   * start(): `waitForStandby` (ms, default 0) lets start() wait up to that long for
   * handlers left in standby (another instance holds their processing lock) to take
   * over and catch up. Handlers still in standby then are reported (a
   * `HandlersInStandby` system event and a `warn` LogStore entry).
   */
  readonly start?: { readonly waitForStandby?: number };
  /**
   * The in-process cache of folded aggregate state (on by default, 10,000
   * aggregates): a load reads and folds only the events after the cached
   * version. `false` turns it off.
   */
  readonly aggregateCache?: AggregateCacheOptions | false;
  /**
   * The in-process cache of `ctx.events` reads (on by default, 10,000
   * queries; off with `false`, or when `aggregateCache` is `false` and this
   * is not given): a read of a cached query reads only the matches after
   * the position it was cached at (docs/dcb.md, "The query cache").
   */
  readonly eventQueryCache?: EventQueryCacheOptions | false;
  /** OpenTelemetry spans and metrics, when @opentelemetry/api is installed (docs/observability.md). `false` turns them off. */
  readonly telemetry?: boolean;
  /**
   * Claims of idempotent dispatch (a command store that offers them): the
   * lease of a running command's claim and how long a duplicate waits for its
   * outcome (docs/reactions.md, "How duplicates are settled: claims").
   */
  readonly idempotency?: IdempotencyOptions;
  /**
   * How long the LogStore keeps its entries (`logs`: milliseconds, an ISO
   * 8601 duration such as `"P30D"`, or `"30d"`): older ones are deleted by
   * the retention job (`facade.applyRetention`, `Runtime.ApplyRetention`,
   * `mneme store retention`). Event types declare theirs with `retainFor`.
   */
  readonly retention?: { readonly logs?: number | string };
}
