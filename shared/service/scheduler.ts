/**
 * Wires the scheduler port (shared/workflow/scheduler.ts) to its default adapter: the EventBridge adapter where
 * infra/scheduler.ts configured the function (SCHEDULE_GROUP set), else the local adapter (its due items are
 * inert until a loop reads them). Chosen on first use, so importing needs no schedule settings. Imported by
 * every host whose code can start or stop a workflow's firing (functions/, the whole-service app, the tests'
 * setup); a host that installs its own scheduler (`setScheduler`) overrides it.
 */
import { setDefaultScheduler } from "../workflow/scheduler";
import { createLocalScheduler } from "../schedule/local";
// Static, not import(): a dynamic import makes esbuild wrap everything it reaches for lazy start-up, and the
// wrapped AWS SDK clients then keep every command they have (+45 KB DynamoDB, +25 KB KMS per function).
import { eventBridgeSchedulerFromEnvironment } from "../schedule/aws";

setDefaultScheduler(() => (process.env.SCHEDULE_GROUP ? eventBridgeSchedulerFromEnvironment() : createLocalScheduler()));
