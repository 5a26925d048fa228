/**
 * `mneme/testing`: conformance suites for backends (need vitest), a test
 * facade, and given/when/then scenarios for domains.
 */
export type { ContractOptions, ContractSkip } from "./contract-options.js";
export { describeEventRepositoryContract } from "./event-repository-contract.js";
export { describeCommandStoreContract } from "./command-store-contract.js";
export { describeDataStoreContract } from "./data-store-contract.js";
export { describeCacheStoreContract } from "./cache-store-contract.js";
export { describeLogStoreContract } from "./log-store-contract.js";
export { describeReadmodelStoreBackendContract } from "./readmodel-store-backend-contract.js";
export { describeSqlTableAccessContract } from "./sql-table-access-contract.js";
export { describeSnapshotStoreContract } from "./snapshot-store-contract.js";
export { describeKeyStoreContract } from "./key-store-contract.js";
export { createTestFacade, testReqCtx, type TestFacadeOptions } from "./test-facade.js";
export { scenario, type ExpectedEvent, type ScenarioGiven, type ScenarioWhen, type ScenarioThen } from "./scenario.js";
export { describeDcbContract, dcbWorld, type DcbWorld, type DcbProbes } from "./dcb-contract.js";
export { dcbExamples, DCB_RULE_BROKEN, type DcbExamples, type DcbExampleOptions } from "./dcb-examples.js";
