/**
 * Installs the scheduler port's adapter (shared/workflow/scheduler/): the EventBridge adapter where
 * infra/scheduler.ts configured the function (SCHEDULE_GROUP set), else the local adapter (its due items are
 * inert until a loop reads them). Made on first use, so installing needs no schedule settings. Called by every
 * host whose code can start or stop a workflow's firing (functions/, the tests' setup, the test and bench
 * service processes); a host that installs its own scheduler (`setScheduler`, as `npm start` does) overrides it.
 */
import { setLazyScheduler } from "../workflow/scheduler";
import { createLocalScheduler } from "../schedule/local";
// Static, not import(): a dynamic import makes esbuild wrap everything it reaches for lazy start-up, and the
// wrapped AWS SDK clients then keep every command they have (+45 KB DynamoDB, +25 KB KMS per function).
import { eventBridgeSchedulerFromEnvironment } from "../schedule/aws";

export function installScheduler(): void {
  setLazyScheduler(() => (process.env.SCHEDULE_GROUP ? eventBridgeSchedulerFromEnvironment() : createLocalScheduler()));
}
