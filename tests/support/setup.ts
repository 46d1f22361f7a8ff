/**
 * Runs before every test file (vitest.config.ts setupFiles): the scheduler installed as each host installs it
 * (shared/service/scheduler.ts), for tests that call domain modules without a host of their own.
 */
import { installScheduler } from "../../shared/service/scheduler";

installScheduler();
