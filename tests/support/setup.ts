/**
 * Runs before every test file (vitest.config.ts setupFiles): the composition root's default scheduler, as each
 * host has it (shared/service/scheduler.ts), for tests that call domain modules without the whole-service app.
 */
import "../../shared/service/scheduler";
